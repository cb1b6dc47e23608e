"""Drops, renames and dropDatabase of captured namespaces: no record (as
Debezium), but an INFO line each, and capture goes on."""

import json


from conftest import wait_until
from pipeline_support import (data_records, key_id_text, log_text, read_jsonl, wait_streaming,
                              write_config)

PREFIX = "it"


def test_drop_rename_drop_database_are_logged(tmp_workdir, users_sim, start_mongocdc):
    sink = tmp_workdir / "run.jsonl"
    cfg = write_config(tmp_workdir, users_sim.uri, sink_path=sink)
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir)
    c = users_sim.client()
    c.nsdb.a.insert_one({"_id": 1})
    c.nsdb.b.insert_one({"_id": 2})
    c.nsdb.a.rename("a2")
    c.nsdb.b.drop()
    c.drop_database("nsdb")
    c.other.z.insert_one({"_id": 3})
    wait_until(lambda: any(r.topic == PREFIX + ".other.z"
                           for r in data_records(read_jsonl(sink), PREFIX)), 30, "the last insert")
    log = log_text(tmp_workdir)
    assert "captured collection nsdb.a was renamed to nsdb.a2" in log, log[-3000:]
    assert "captured collection nsdb.b was dropped" in log, log[-3000:]
    assert "database nsdb was dropped" in log, log[-3000:]
    assert d.stop(timeout_s=30) == 0


def test_two_namespaces_sharing_a_topic_are_warned(tmp_workdir, users_sim, start_mongocdc):
    """"a b" and "a_b" both sanitise to topic it.nsdb.a_b: one WARN names both (Debezium warns
    when it replaces a topic name); records still flow, to the shared topic."""
    sink = tmp_workdir / "run.jsonl"
    cfg = write_config(tmp_workdir, users_sim.uri, sink_path=sink)
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir)
    c = users_sim.client()
    c.nsdb["a b"].insert_one({"_id": 1})
    c.nsdb["a_b"].insert_one({"_id": 2})
    c.nsdb["a.c"].insert_one({"_id": 3})  # a topic of its own: no WARN
    wait_until(lambda: len([r for r in data_records(read_jsonl(sink), PREFIX)
                            if r.topic.startswith(PREFIX + ".nsdb.")]) >= 3, 30, "the inserts")
    log = log_text(tmp_workdir)
    warns = [l for l in log.splitlines() if "both go to topic" in l]
    assert len(warns) == 1, log[-3000:]
    assert "WARN" in warns[0] and "nsdb.a b and nsdb.a_b both go to topic it.nsdb.a_b" in warns[0]
    assert d.stop(timeout_s=30) == 0
