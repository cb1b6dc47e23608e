"""Drops, renames and dropDatabase of captured namespaces: no record (as
Debezium), but an INFO line each, and capture goes on."""

import json

import pytest

from conftest import wait_until
from pipeline_support import (Sim, data_records, dataset_loads, key_id_text, log_text,
                              read_jsonl, write_config)

PREFIX = "it"


@pytest.fixture
def users_sim(tmp_workdir, shared_dir):
    sim = Sim(tmp_workdir, dataset_loads(shared_dir, only={"sample_mflix.users"}))
    yield sim
    sim.stop()


def test_drop_rename_drop_database_are_logged(tmp_workdir, users_sim, start_mongocdc):
    sink = tmp_workdir / "run.jsonl"
    cfg = write_config(tmp_workdir, users_sim.uri, sink_path=sink)
    d = start_mongocdc("-c", cfg)
    wait_until(lambda: "streaming changes from" in log_text(tmp_workdir), 60, "streaming")
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
