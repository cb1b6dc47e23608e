"""Hashed shard keys in per-shard capture (connection mode replica_set,
debezium-format.md §6.1): chunk bounds of a collection sharded on
{_id: "hashed"} are ranges of MongoDB's hash64 of _id (NumberLong), which a
find cannot filter by, so each shard's snapshot reads all its documents and
drops those hashing outside the chunks it owns (orphans, unowned copies); the
cross-shard order gate looks documents up by their hash, so a migration of a
hashed chunk keeps each document's events in order (test_sharded_gate.py).

Runs on the simulator's sharded topology, which places documents by the same
hash64 as real MongoDB (tests/mongosim/simhash.py, proven against MongoDB's
hasher_test.cpp values).
"""

import json
import re

from bson.int64 import Int64

from conftest import start_sharded_sim
from pipeline_support import key_id_text, log_text, sink_records, wait_log, write_config

PREFIX = "it"
N = 200
MID = Int64(1 << 62)  # chunks: [MinKey, 0) [0, 2^62) [2^62, MaxKey) of hash64(_id)


def hash64(v):
    import simhash  # on sys.path once import_mongosim ran
    return simhash.hash64(v)


def populate(sim):
    """hash.h sharded on {_id: "hashed"}: [MinKey, 0) on shard01, [0, MaxKey) split at
    2^62, both on shard02. Returns the pymongo client (through mongos)."""
    c = sim.client()
    c.admin.command("enableSharding", "hash")
    c.admin.command("shardCollection", "hash.h", key={"_id": "hashed"})
    c.admin.command("split", "hash.h", middle={"_id": Int64(0)})
    c.admin.command("split", "hash.h", middle={"_id": MID})
    pos = [i for i in range(N) if hash64(i) >= 0]
    high = [i for i in pos if hash64(i) >= MID]
    mid = [i for i in pos if hash64(i) < MID]
    assert high and mid
    c.admin.command("moveChunk", "hash.h", find={"_id": mid[0]}, to="shard02")
    c.admin.command("moveChunk", "hash.h", find={"_id": high[0]}, to="shard02")
    c.hash.h.insert_many([{"_id": i, "v": 0} for i in range(N)])
    return c, mid, high


def test_hashed_snapshot_with_orphans_reads_every_document_once(tmp_workdir, start_mongocdc):
    """The chunk [0, 2^62) moves back to shard01 with range deletion deferred:
    shard02 keeps its documents as orphans, and holds an unowned copy of a
    document shard01 owns. Each shard's task reads its primary directly and
    drops what hashes outside its chunks: every document exactly once, in its
    owner's version, and the count of dropped orphans logged per collection."""
    import pymongo
    sim = start_sharded_sim()
    try:
        c, mid, high = populate(sim)
        sim.control("orphans", keep=True)
        c.admin.command("moveChunk", "hash.h", find={"_id": mid[0]}, to="shard01")
        owned_by_1 = [i for i in range(N) if hash64(i) < MID]
        direct = pymongo.MongoClient(sim.shard_uris["shard02"], serverSelectionTimeoutMS=10000)
        stale = next(i for i in owned_by_1 if hash64(i) < 0)
        direct.hash.h.insert_one({"_id": stale, "v": "stale copy"})
        on2 = direct.hash.h.count_documents({})
        direct.close()
        assert on2 == len(high) + len(mid) + 1
        assert len(list(c.hash.h.find({}))) == N, "mongos must not return orphans"

        cfg = write_config(tmp_workdir, sim.uri)
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "streaming changes from", 120, d, n=2)
        recs = [r for r in sink_records(tmp_workdir) if r.op == "r"]
        ids = sorted(json.loads(key_id_text(r)) for r in recs)
        assert ids == list(range(N)), "hashed collection not read exactly once"
        by_id = {json.loads(key_id_text(r)): r for r in recs}
        assert "stale copy" not in by_id[stale].payload["after"]
        assert {r.payload["source"]["rs"] for r in recs if json.loads(key_id_text(r)) in high} == {"shard02"}
        assert {r.payload["source"]["rs"] for r in recs if json.loads(key_id_text(r)) in mid} == {"shard01"}
        log = log_text(tmp_workdir)
        m = re.findall(r"snapshot of hash\.h: (\d+) orphans dropped \(hashed shard key outside the "
                       r"chunks (shard0\d) owns\)", log)
        assert sorted(m) == sorted([("0", "shard01"), (str(len(mid) + 1), "shard02")]), m
        assert "has a hashed shard key" not in log
        assert d.stop(timeout_s=30) == 0
        c.close()
    finally:
        sim.stop()


def test_hashed_signal_snapshots_drop_orphans(tmp_workdir, start_mongocdc):
    """execute-snapshot signals on a hashed-sharded collection with orphans:
    the incremental snapshot (each shard's task reads its chunks in windows)
    and then a blocking one both give every document exactly once, none from
    an orphan or an unowned copy."""
    import pymongo
    sim = start_sharded_sim()
    try:
        c, mid, high = populate(sim)
        sim.control("orphans", keep=True)
        c.admin.command("moveChunk", "hash.h", find={"_id": mid[0]}, to="shard01")
        direct = pymongo.MongoClient(sim.shard_uris["shard02"], serverSelectionTimeoutMS=10000)
        stale = next(i for i in range(N) if hash64(i) < 0)
        direct.hash.h.insert_one({"_id": stale, "v": "stale copy"})
        direct.close()
        cfg = write_config(tmp_workdir, sim.uri, raw={
            "signal.data.collection": "hash.signals", "snapshot.mode": "no_data",
            "incremental.snapshot.chunk.size": 16})
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "streaming changes from", 120, d, n=2)
        c.hash.signals.insert_one({"_id": "inc-h", "type": "execute-snapshot",
                                   "data": {"data-collections": ["hash.h"]}})
        wait_log(tmp_workdir, "incremental snapshot (signal inc-h) completed", 120, d, n=2)
        topic = "%s.hash.h" % PREFIX

        def rows():
            return [r for r in sink_records(tmp_workdir) if r.op == "r" and r.topic == topic]
        got = rows()
        assert sorted(json.loads(key_id_text(r)) for r in got) == list(range(N)), \
            "incremental snapshot: not every document exactly once"
        assert all("stale copy" not in r.payload["after"] for r in got)
        c.hash.signals.insert_one({"_id": "blk-h", "type": "execute-snapshot",
                                   "data": {"data-collections": ["hash.h"], "type": "blocking"}})
        wait_log(tmp_workdir, "blocking snapshot (signal blk-h) done", 120, d, n=2)
        blocking = rows()[len(got):]
        assert sorted(json.loads(key_id_text(r)) for r in blocking) == list(range(N)), \
            "blocking snapshot: not every document exactly once"
        assert all("stale copy" not in r.payload["after"] for r in blocking)
        assert d.stop(timeout_s=30) == 0
        c.close()
    finally:
        sim.stop()
