"""Offsets files that must never turn into "stream from now": an entry with
no usable position, sec/ord outside a Timestamp's unsigned 32-bit fields, or a
duplicated key stops the daemon with exit 1 naming the file and the entry;
nothing is produced. Entries of another topic.prefix are named in a WARN.
"""

import json

import pytest

from conftest import wait_until
from pipeline_support import log_text, offsets_value, read_jsonl, wait_streaming, write_config

PREFIX = "it"


def _stored_key(tmp_workdir, sim, start_mongocdc):
    """Runs once to completion of the snapshot and returns the offsets key."""
    cfg = write_config(tmp_workdir, sim.uri, name="run1.yaml", sink_path=tmp_workdir / "run1.jsonl")
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir)
    assert d.stop(timeout_s=30) == 0
    doc = json.loads((tmp_workdir / "offsets.json").read_text())
    return next(iter(doc))


BAD = [
    ("empty", "{}", "no usable position"),
    ("minus_one", '{"sec":-1,"ord":-1}', "no usable position"),
    ("minus_one_null_token", '{"sec":-1,"ord":-1,"h":null,"resume_token":null}',
     "no usable position"),
    ("sec_over_32_bits", '{"sec":4294967296,"ord":1}', "unsigned 32-bit"),
    ("duplicate_sec", '{"sec":1,"ord":1,"sec":1700000000}', 'duplicate key "sec"'),
]


@pytest.mark.parametrize("name,value,why", BAD, ids=[b[0] for b in BAD])
def test_unusable_offsets_entry_exits_1(tmp_workdir, users_sim, start_mongocdc, run_mongocdc,
                                        name, value, why):
    key = _stored_key(tmp_workdir, users_sim, start_mongocdc)
    path = tmp_workdir / "offsets.json"
    path.write_text("{%s:%s}" % (json.dumps(key), value))
    sink = tmp_workdir / "run2.jsonl"
    cfg = write_config(tmp_workdir, users_sim.uri, name="run2.yaml", sink_path=sink)
    r = run_mongocdc("-c", cfg, timeout_s=60)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1, err[-2000:]
    assert why in err, err[-2000:]
    assert str(path) in err and "rs" in err, err[-2000:]
    assert not sink.exists() or not read_jsonl(sink), "records produced from an unusable offset"
    assert path.read_text() == "{%s:%s}" % (json.dumps(key), value), "offsets file rewritten"


def test_other_topic_prefix_is_warned(tmp_workdir, users_sim, start_mongocdc):
    key = _stored_key(tmp_workdir, users_sim, start_mongocdc)
    cfg = write_config(tmp_workdir, users_sim.uri, name="run2.yaml",
                       sink_path=tmp_workdir / "run2.jsonl", **{"topic.prefix": "other"})
    d = start_mongocdc("-c", cfg)
    wait_until(lambda: ('holds a position under %s, which is not this source\'s (name "other", '
                        'topic.prefix "other")' % key) in log_text(tmp_workdir), 60,
               "the WARN about the other topic.prefix")
    assert d.stop(timeout_s=30) == 0
    assert offsets_value(tmp_workdir)


@pytest.mark.parametrize("mode", ["change_streams", "oplog"])
def test_position_later_than_the_oplog_exits_1(tmp_workdir, users_sim, start_mongocdc,
                                               run_mongocdc, mode):
    """A stored position a day past the newest oplog entry (offsets of
    another deployment, or one restored from an older backup): streaming
    from it would wait for that time and then skip everything before it.
    Exit 1 naming both times; nothing produced, the offsets kept."""
    key = _stored_key(tmp_workdir, users_sim, start_mongocdc)
    path = tmp_workdir / "offsets.json"
    stored = json.loads(path.read_text())[key]
    newest = users_sim.client().local["oplog.rs"].find_one(sort=[("$natural", -1)])["ts"]
    value = json.dumps({"sec": newest.time + 86400, "ord": 1, "h": None,
                        "initsync": False} if mode == "oplog" else
                       {"sec": newest.time + 86400, "ord": 1})
    assert stored, "the first run stored a position"
    path.write_text("{%s:%s}" % (json.dumps(key), value))
    sink = tmp_workdir / "run2.jsonl"
    cfg = write_config(tmp_workdir, users_sim.uri, name="run2.yaml", sink_path=sink,
                       **{"capture.mode": mode, "snapshot.mode": "initial"})
    r = run_mongocdc("-c", cfg, timeout_s=60)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1, err[-2000:]
    assert "later than the newest entry of its oplog" in err, err[-2000:]
    assert "Timestamp(%d, 1)" % (newest.time + 86400) in err, err[-2000:]
    assert not sink.exists() or not read_jsonl(sink), "records produced"
    assert path.read_text() == "{%s:%s}" % (json.dumps(key), value), "offsets file rewritten"
