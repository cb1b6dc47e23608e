"""A poison event (one that cannot be encoded: field.renames onto a field the
document already has) under each event.processing.failure.handling.mode:
fail stops with an error naming the namespace, _id and the setting; warn and
skip log the namespace, _id and reason, count it, move the offset past it and
go on with the next event.
"""

import json

import pytest

from conftest import wait_until
from pipeline_support import data_records, key_id_text, log_text, read_jsonl, write_config

PREFIX = "it"


def poison_ids(path):
    recs = data_records(read_jsonl(path), PREFIX) if path.exists() else []
    return [json.loads(key_id_text(r)) for r in recs
            if r.topic == PREFIX + ".itdb.poison" and r.op in ("c", "u", "d")]


def start(tmp_workdir, sim, start_mongocdc, mode, name):
    opts = {"field.renames": "itdb.poison.a:b"}
    if mode is not None:
        opts["event.processing.failure.handling.mode"] = mode
    cfg = write_config(tmp_workdir, sim.uri, name=name + ".yaml",
                       sink_path=tmp_workdir / (name + ".jsonl"), **opts)
    d = start_mongocdc("-c", cfg)
    wait_until(lambda: "streaming changes from" in log_text(tmp_workdir) or not d.running(),
               60, "streaming")
    return d


def test_fail_stops_naming_namespace_id_and_setting(tmp_workdir, users_sim, start_mongocdc):
    d = start(tmp_workdir, users_sim, start_mongocdc, None, "run1")
    c = users_sim.client()
    c.itdb.poison.insert_one({"_id": 1, "a": 1, "b": 2})
    wait_until(lambda: not d.running(), 30, "mongocdc to stop on the poison event")
    assert d.stop(timeout_s=10) == 1
    log = log_text(tmp_workdir)
    assert "itdb.poison" in log and '{"_id": 1}' in log, log[-2000:]
    assert "already contains field" in log and "event.processing.failure.handling.mode" in log
    assert poison_ids(tmp_workdir / "run1.jsonl") == []


@pytest.mark.parametrize("mode,level", [("warn", "WARN"), ("skip", "INFO"), ("ignore", "INFO")])
def test_warn_and_skip_move_past_the_event(tmp_workdir, users_sim, start_mongocdc, mode, level):
    d = start(tmp_workdir, users_sim, start_mongocdc, mode, "run1")
    c = users_sim.client()
    c.itdb.poison.insert_one({"_id": 1, "a": 1, "b": 2})
    c.itdb.poison.insert_one({"_id": 2, "a": 1})
    wait_until(lambda: poison_ids(tmp_workdir / "run1.jsonl") == [2], 30, "the next event")
    log = log_text(tmp_workdir)
    line = next(l for l in log.splitlines() if "skipping a change of itdb.poison" in l)
    assert '{"_id": 1}' in line and "already contains field" in line, line
    assert level.lower() in line.lower(), line
    assert d.stop(timeout_s=30) == 0
    assert "1 not encodable and moved past" in log_text(tmp_workdir)
    # the stored offset is past the poison event: a restart does not meet it again
    c.itdb.poison.insert_one({"_id": 3, "a": 1})
    d2 = start(tmp_workdir, users_sim, start_mongocdc, "fail", "run2")
    wait_until(lambda: poison_ids(tmp_workdir / "run2.jsonl") == [3], 30, "the event after restart")
    assert d2.running()
    assert d2.stop(timeout_s=30) == 0


def test_oversized_event_fails_with_a_clear_error(tmp_workdir, users_sim, start_mongocdc):
    """cursor.oversize.handling.mode fail (the default): exit 1 with the size,
    where the stream stands and what to change, not the driver's cut-off text."""
    d = start(tmp_workdir, users_sim, start_mongocdc, None, "run1")
    c = users_sim.client()
    users_sim.control("poison_event")
    c.itdb.big.insert_one({"_id": 1})
    wait_until(lambda: not d.running(), 60, "mongocdc to stop on the oversized event")
    assert d.stop(timeout_s=10) == 1
    log = log_text(tmp_workdir)
    assert "over MongoDB's 16 MiB limit (16793699 bytes)" in log, log[-2000:]
    assert "cursor.oversize.handling.mode split or skip" in log and "collection.exclude.list" in log
    assert "resume token at Timestamp(" in log, log[-2000:]
