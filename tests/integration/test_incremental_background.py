"""Incremental snapshot chunks are read by a reader thread of their own, so
streaming goes on while a chunk is read (debezium-format.md §5.4 windows).

The simulator holds every `find` on the snapshotted collection until the
test releases it: the chunk read cannot complete meanwhile. Changes written
while it is held must be published before the read completes (with markers:
before the close marker exists, since the reader writes it after the read;
with the cluster time: before any row), and the window semantics must hold
although the window's buffer did not exist when those changes streamed: a
key changed inside the window loses its row, its event is kept, and the
topic replays to the collection's final state.
"""

import json

import pytest

from conftest import wait_until
from pipeline_support import Sim, log_text, read_jsonl, wait_streaming, write_config
from test_incremental_snapshot import (PREFIX, SIGNALS, assert_replay_matches, coll_records,
                                       key_of, reads, signal, wait_done)


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    s = Sim(tmp_path_factory.mktemp("incbg"), members=1)
    yield s
    s.stop()


def ops_of(path, db, coll):
    out = []
    for r in coll_records(path, db, coll):
        if r.value_raw is not None:
            p = json.loads(r.value_raw)
            p = p.get("payload", p)
            out.append((p["op"], key_of(r)))
    return out


def markers_in_stream(path):
    sig = [r for r in read_jsonl(path) if r.topic == "%s.%s" % (PREFIX, SIGNALS)]
    return [r.value_raw or "" for r in sig]


def held_finds(sim):
    return sim.control("delays").get("find", {}).get("waiting", 0)


def hold_finds(sim, coll):
    sim.control("delay", command="find", ms=600000, collection=coll)


def release_finds(sim):
    sim.control("delay", command="find", ms=0)


def start(tmp_workdir, sim, start_mongocdc, **raw):
    conf = {"signal.data.collection": SIGNALS, "snapshot.mode": "no_data",
            "incremental.snapshot.chunk.size": 100}
    conf.update(raw)
    d = start_mongocdc("-c", write_config(tmp_workdir, sim.uri, raw=conf))
    wait_streaming(tmp_workdir)
    return d


@pytest.mark.parametrize("strategy", ["insert_insert", "insert_delete"])
def test_markers_stream_goes_on_while_a_chunk_is_read(tmp_workdir, sim, start_mongocdc,
                                                       strategy):
    c = sim.client()
    db, coll, other = "bgdb", "slow_" + strategy, "fast_" + strategy
    c[db][coll].insert_many([{"_id": i, "v": 0} for i in range(30)])
    d = start(tmp_workdir, sim, start_mongocdc,
              **{"incremental.snapshot.watermarking.strategy": strategy})
    events = tmp_workdir / "events.jsonl"
    sdb, scoll = SIGNALS.split(".")
    opens = c[sdb][scoll].count_documents({"type": "snapshot-window-open"})
    closes = c[sdb][scoll].count_documents({"type": "snapshot-window-close"})
    hold_finds(sim, coll)
    try:
        sid = signal(c, "execute-snapshot", {"data-collections": ["%s.%s" % (db, coll)]})
        # the reader wrote the open marker and its read is held by the server
        wait_until(lambda: held_finds(sim) >= 1, 60, "the chunk read held by the server")
        wait_until(lambda: any("snapshot-window-open" in v for v in markers_in_stream(events)),
                   60, "the open marker in the stream")
        c[db][coll].update_one({"_id": 7}, {"$set": {"v": 1}})  # inside the window
        c[db][coll].delete_one({"_id": 9})
        c[db][other].insert_one({"_id": "during-the-read"})
        wait_until(lambda: ops_of(events, db, other) == [("c", "during-the-read")], 60,
                   "the change written during the read published")
        wait_until(lambda: ("u", 7) in ops_of(events, db, coll), 60, "the in-window update")
        # published while the read is still held: no row, and the close is not written yet
        assert held_finds(sim) >= 1
        assert not reads(events, db, coll)
        if strategy == "insert_insert":
            assert c[sdb][scoll].count_documents({"type": "snapshot-window-close"}) == closes
        else:  # the open marker is not deleted yet
            assert c[sdb][scoll].count_documents({"type": "snapshot-window-open"}) == opens + 1
    finally:
        release_finds(sim)
    wait_done(tmp_workdir, sid, 60)
    ops = ops_of(events, db, coll)
    rows = [k for op, k in ops if op == "r"]
    # the changed keys lost their rows (the streamed change is newer), the others are read once
    assert sorted(rows) == [i for i in range(30) if i not in (7, 9)]
    assert ops.index(("u", 7)) < ops.index(("r", rows[0]))
    assert_replay_matches(c, events, db, coll)
    assert d.stop(timeout_s=30) == 0


def test_cluster_time_stream_goes_on_while_a_chunk_is_read(tmp_workdir, sim, start_mongocdc):
    c = sim.client()
    db, coll, other = "bgdb", "slow_ct", "fast_ct"
    c[db][coll].insert_many([{"_id": i, "v": 0} for i in range(30)])
    d = start(tmp_workdir, sim, start_mongocdc, **{"read.only": True})
    events = tmp_workdir / "events.jsonl"
    hold_finds(sim, coll)
    try:
        sid = signal(c, "execute-snapshot", {"data-collections": ["%s.%s" % (db, coll)]})
        # the reader took T (the operationTime before its reads); its find is held
        wait_until(lambda: held_finds(sim) >= 1, 60, "the chunk read held by the server")
        c[db][coll].update_one({"_id": 4}, {"$set": {"v": 2}})  # after T
        c[db][coll].insert_one({"_id": 100, "v": 3})            # after T, not in the rows
        c[db][other].insert_one({"_id": "during-the-read"})
        wait_until(lambda: ops_of(events, db, other) == [("c", "during-the-read")], 60,
                   "the change written during the read published")
        wait_until(lambda: ("u", 4) in ops_of(events, db, coll), 60, "the update after T")
        assert held_finds(sim) >= 1
        assert not reads(events, db, coll)
    finally:
        release_finds(sim)
    wait_done(tmp_workdir, sid, 60)
    ops = ops_of(events, db, coll)
    rows = [k for op, k in ops if op == "r"]
    # the rows are the state at T: key 4 changed after T lost its row; 100 did not exist at T
    assert sorted(rows) == [i for i in range(30) if i != 4]
    assert ops.index(("u", 4)) < ops.index(("r", rows[0]))
    assert "cluster-time windows" in log_text(tmp_workdir)
    assert_replay_matches(c, events, db, coll)
    assert d.stop(timeout_s=30) == 0


def test_stop_while_a_chunk_read_is_held_does_not_hang(tmp_workdir, sim, start_mongocdc):
    """The reader is stopped with the task: the held read is abandoned (its
    result discarded) and a restart reads the chunk again."""
    c = sim.client()
    db, coll = "bgdb", "slow_stop"
    c[db][coll].insert_many([{"_id": i} for i in range(10)])
    d = start(tmp_workdir, sim, start_mongocdc)
    # held a few seconds: the stop waits at most for the round trip under way
    sim.control("delay", command="find", ms=4000, collection=coll)
    try:
        sid = signal(c, "execute-snapshot", {"data-collections": ["%s.%s" % (db, coll)]})
        wait_until(lambda: held_finds(sim) >= 1, 60, "the chunk read held by the server")
        assert d.stop(timeout_s=60) == 0
    finally:
        release_finds(sim)
    assert not reads(tmp_workdir / "events.jsonl", db, coll)
    d = start_mongocdc("-c", str(tmp_workdir / "cfg.yaml"))
    wait_done(tmp_workdir, sid, 60)
    rows = sorted(key_of(r) for r, _ in reads(tmp_workdir / "events.jsonl", db, coll))
    assert rows == list(range(10))
    assert d.stop(timeout_s=30) == 0
