"""The main job end to end on the simulator: initial snapshot of the shared
datasets, then streaming, with byte-exact keys; restarts resume with no gap
(SIGTERM: nothing replayed; SIGKILL: replays only after the committed offset).

The file sink stands in for Kafka here (Kafka is not the point: test_crash.py
and test_faults.py run against the broker); each record line holds the key and
value bytes verbatim.
"""

import base64
import collections
import json
import re
import time

import pytest
from bson import BSON

from conftest import wait_until
from pipeline_support import (Sim, data_records, dataset_docs, dataset_loads, expected_key,
                              key_id_text, offsets_value, read_jsonl, stream_records, wait_log,
                              write_config)

PREFIX = "it"


def token_time(offsets_json):
    """(sec, inc) of the resume token stored in an offsets file value."""
    v = json.loads(offsets_json)
    if isinstance(v, dict) and "resume_token" not in v:
        # a file holding several partitions: take the only value
        vals = [x for x in v.values() if isinstance(x, dict)]
        v = vals[0] if vals else v
    if re.fullmatch(r"[0-9A-Fa-f]+", v["resume_token"]):
        data = v["resume_token"]  # the 1.9 layout stores the `_data` hex itself
    else:
        data = BSON(base64.b64decode(v["resume_token"])).decode()["_data"]
    return int(data[2:10], 16), int(data[10:18], 16)


def src_time(rec):
    s = rec.payload["source"]
    return s["ts_ms"] // 1000, s["ord"]


@pytest.fixture
def datasets_sim(tmp_workdir, shared_dir):
    sim = Sim(tmp_workdir, dataset_loads(shared_dir))
    yield sim
    sim.stop()


def test_snapshot_then_streaming_of_the_datasets(tmp_workdir, shared_dir, datasets_sim,
                                                 start_mongocdc):
    sim = datasets_sim
    cfg = write_config(tmp_workdir, sim.uri, **{"snapshot.max.threads": 2})
    d = start_mongocdc("-c", cfg)
    wait_log(tmp_workdir, "snapshot complete", 300, d)

    recs = data_records(read_jsonl(tmp_workdir / "events.jsonl"), PREFIX)
    reads = [r for r in recs if r.op == "r"]
    # every document once as r, with Debezium's key bytes
    by_topic = collections.defaultdict(list)
    for r in reads:
        by_topic[r.topic].append(r)
    total = 0
    for path, ns in dataset_loads(shared_dir):
        docs = dataset_docs(path)
        got = by_topic.get("%s.%s" % (PREFIX, ns), [])
        assert len(got) == len(docs), ns
        total += len(docs)
        want_keys = collections.Counter(expected_key(doc["_id"]) for doc in docs if "_id" in doc)
        want_keys.pop(None, None)
        got_keys = collections.Counter(r.key for r in got)
        for k, n in want_keys.items():
            assert got_keys[k] == n, "%s: key %s seen %d times, want %d" % (ns, k, got_keys[k], n)
        assert len(set(r.key for r in got)) == len(got), "%s: a document appears twice" % ns
    assert len(reads) == total
    snaps = [r.snapshot for r in reads]
    assert snaps.count("last") == 1 and snaps[-1] == "last"
    assert all(s == "true" for s in snaps[:-1])

    # streaming: inserts, updates, replaces and deletes, in order per key
    c = sim.client()
    coll = c.itdb.orders
    expect = []
    for i in range(1, 6):
        coll.insert_one({"_id": i, "item": "item-%d" % i, "qty": i})
        expect.append((i, "c"))
    for i in range(1, 6):
        coll.update_one({"_id": i}, {"$set": {"qty": i * 10}, "$unset": {"item": ""}})
        expect.append((i, "u"))
    coll.replace_one({"_id": 2}, {"item": "replaced", "qty": 0})
    expect.append((2, "u"))
    coll.delete_one({"_id": 3})
    expect.append((3, "d"))
    cust = c.sample_analytics.customers.find_one({}, {"_id": 1})
    c.sample_analytics.customers.update_one({"_id": cust["_id"]}, {"$set": {"active": False}})
    c.close()

    def streamed():
        return len(stream_records(tmp_workdir / "events.jsonl")) >= len(expect) + 1
    wait_until(streamed, 60, "streamed changes")
    got = stream_records(tmp_workdir / "events.jsonl")
    orders = [r for r in got if r.topic == PREFIX + ".itdb.orders"]
    assert [(json.loads(key_id_text(r)), r.op) for r in orders] == expect
    for r in orders:
        assert r.key == expected_key(json.loads(key_id_text(r)))
        assert r.snapshot in (None, "false")
    upd = [r for r in orders if r.op == "u"][0]
    assert upd.updated_fields() == {"qty": 10}
    assert upd.payload["updateDescription"]["removedFields"] == ["item"]
    assert orders[-1].op == "d" and orders[-1].after() is None
    # tombstone after the delete (tombstones.on.delete defaults to true)
    all_orders = [r for r in read_jsonl(tmp_workdir / "events.jsonl")
                  if r.topic == PREFIX + ".itdb.orders"]
    assert all_orders[-1].op == "tombstone" and all_orders[-1].key == orders[-1].key
    cu = [r for r in got if r.topic == PREFIX + ".sample_analytics.customers"]
    assert len(cu) == 1 and cu[0].op == "u" and cu[0].key == expected_key(cust["_id"])

    t0 = time.monotonic()
    assert d.stop(timeout_s=30) == 0
    took = time.monotonic() - t0
    assert took < 0.3 + 5 + 3, "shutdown took %.1fs" % took
    off = offsets_value(tmp_workdir)
    assert off and "initsync" not in off and "resume_token" in off


def _small_sim(tmp_workdir, shared_dir):
    return Sim(tmp_workdir, dataset_loads(shared_dir, only={"sample_mflix.users"}))


def test_restart_after_sigterm_resumes_with_no_gap(tmp_workdir, shared_dir, start_mongocdc):
    sim = _small_sim(tmp_workdir, shared_dir)
    try:
        c = sim.client()
        coll = c.itdb.restart
        cfg1 = write_config(tmp_workdir, sim.uri, name="run1.yaml",
                            sink_path=tmp_workdir / "run1.jsonl")
        d = start_mongocdc("-c", cfg1)
        wait_log(tmp_workdir, "snapshot complete", 120, d)
        for i in range(5):
            coll.insert_one({"_id": "a%d" % i, "v": 0})
        wait_until(lambda: len(stream_records(tmp_workdir / "run1.jsonl")) >= 5, 30, "run 1")
        assert d.stop(timeout_s=30) == 0
        assert "resume_token" in offsets_value(tmp_workdir)

        # changes while mongocdc is down
        for i in range(5):
            coll.insert_one({"_id": "b%d" % i, "v": 0})
        coll.update_one({"_id": "a0"}, {"$set": {"v": 1}})
        coll.delete_one({"_id": "a1"})

        cfg2 = write_config(tmp_workdir, sim.uri, name="run2.yaml",
                            sink_path=tmp_workdir / "run2.jsonl")
        d2 = start_mongocdc("-c", cfg2)
        wait_until(lambda: len(stream_records(tmp_workdir / "run2.jsonl")) >= 7, 60, "run 2")
        time.sleep(1)
        run2 = data_records(read_jsonl(tmp_workdir / "run2.jsonl"), PREFIX)
        assert not [r for r in run2 if r.op == "r"], "the snapshot was redone"
        got = [(json.loads(key_id_text(r)), r.op) for r in run2 if r.op in ("c", "u", "d")]
        want = [("b%d" % i, "c") for i in range(5)] + [("a0", "u"), ("a1", "d")]
        assert got == want, "a gap or a duplicate after a clean restart"
        assert d2.stop(timeout_s=30) == 0
        c.close()
    finally:
        sim.stop()


def test_restart_after_sigkill_replays_only_after_the_committed_offset(tmp_workdir, shared_dir,
                                                                       start_mongocdc):
    sim = _small_sim(tmp_workdir, shared_dir)
    try:
        c = sim.client()
        coll = c.itdb.kill
        cfg1 = write_config(tmp_workdir, sim.uri, name="run1.yaml",
                            sink_path=tmp_workdir / "run1.jsonl",
                            **{"offsets.flush.interval.ms": 1500})
        d = start_mongocdc("-c", cfg1)
        wait_log(tmp_workdir, "snapshot complete", 120, d)
        for i in range(40):
            coll.insert_one({"_id": i, "v": 0})
            time.sleep(0.02)
        wait_until(lambda: len(stream_records(tmp_workdir / "run1.jsonl")) >= 40, 30, "run 1")
        d.proc.kill()
        d.proc.wait(timeout=10)
        committed = offsets_value(tmp_workdir)
        assert committed, "no offsets were committed before the kill"
        sec, inc = token_time(committed)

        for i in range(40, 50):
            coll.insert_one({"_id": i, "v": 0})
        cfg2 = write_config(tmp_workdir, sim.uri, name="run2.yaml",
                            sink_path=tmp_workdir / "run2.jsonl")
        d2 = start_mongocdc("-c", cfg2)
        wait_until(lambda: any(json.loads(key_id_text(r)) == 49
                               for r in stream_records(tmp_workdir / "run2.jsonl")), 60, "run 2")
        run1 = stream_records(tmp_workdir / "run1.jsonl")
        run2 = stream_records(tmp_workdir / "run2.jsonl")
        seen1 = set(r.key for r in run1)
        dups = [r for r in run2 if r.key in seen1]
        for r in dups:
            assert src_time(r) >= (sec, inc), "replayed a change before the committed offset"
        ids = [json.loads(key_id_text(r)) for r in run1 + run2]
        assert sorted(set(ids)) == list(range(50)), "a change is missing"
        print("SIGKILL restart: %d records replayed after the committed offset" % len(dups))
        assert d2.stop(timeout_s=30) == 0
        c.close()
    finally:
        sim.stop()


@pytest.mark.parametrize("mode", ["change_streams", "change_streams_update_full",
                                  "change_streams_with_pre_image",
                                  "change_streams_update_full_with_pre_image"])
def test_capture_modes(tmp_workdir, start_mongocdc, mode):
    sim = Sim(tmp_workdir, (), extra=("--pre-images",))
    try:
        cfg = write_config(tmp_workdir, sim.uri, **{"capture.mode": mode,
                                                    "debezium.compatibility": "3.x",
                                                    "snapshot.mode": "no_data"})
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "streaming changes from", 30, d)
        c = sim.client()
        c.itdb.modes.insert_one({"_id": 1, "a": 1})
        c.itdb.modes.update_one({"_id": 1}, {"$set": {"a": 2}})
        # updateLookup reads the document when the event is read: delete it only after
        wait_until(lambda: len(stream_records(tmp_workdir / "events.jsonl")) >= 2, 30, "2 events")
        c.itdb.modes.delete_one({"_id": 1})
        wait_until(lambda: len(stream_records(tmp_workdir / "events.jsonl")) >= 3, 30, "3 events")
        ins, upd, dele = stream_records(tmp_workdir / "events.jsonl")[:3]
        full = "update_full" in mode
        pre = "pre_image" in mode
        assert upd.op == "u" and upd.updated_fields() == {"a": 2}
        assert (upd.after() is not None) == full
        if full:
            assert upd.after()["a"] == 2
        assert (upd.payload.get("before") is not None) == pre
        if pre:
            assert json.loads(upd.payload["before"])["a"] == 1
            assert json.loads(dele.payload["before"])["a"] == 2
        assert d.stop(timeout_s=30) == 0
    finally:
        sim.stop()


def test_cursor_pipeline_is_appended_to_the_stream(tmp_workdir, start_mongocdc):
    sim = Sim(tmp_workdir, ())
    try:
        cfg = write_config(tmp_workdir, sim.uri, **{
            "snapshot.mode": "no_data",
            "cursor.pipeline": '[{"$match": {"operationType": {"$in": ["insert", "delete"]}}}]'})
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "streaming changes from", 30, d)
        c = sim.client()
        c.itdb.pipe.insert_one({"_id": 1})
        c.itdb.pipe.update_one({"_id": 1}, {"$set": {"a": 1}})
        c.itdb.pipe.delete_one({"_id": 1})
        wait_until(lambda: len(stream_records(tmp_workdir / "events.jsonl")) >= 2, 30, "events")
        time.sleep(1)
        assert [r.op for r in stream_records(tmp_workdir / "events.jsonl")] == ["c", "d"]
        assert d.stop(timeout_s=30) == 0
    finally:
        sim.stop()
