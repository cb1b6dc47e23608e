"""Rollback of writes past the majority commit point, through pymongo and libmongoc
(mongo-sim-spec.md §8.2 "no majority"; MongoDB src/mongo/db/repl/README.md, "Rollback:
Recover To A Timestamp"; the manual's "Rollbacks During Replica Set Failover")."""

import subprocess
import threading
import time

import pytest
from bson import json_util
from pymongo.errors import OperationFailure, PyMongoError
from pymongo.read_concern import ReadConcern

from conftest import MongoSim


def _freeze_and_write(sim, c):
    """Committed writes, then the majority point frozen and w:1 writes past it (plain, a
    transaction, an update and a delete of committed documents, a new collection)."""
    c.rb.c.insert_many([{"_id": i, "v": 0} for i in range(3)])
    point = c.local.oplog.rs.find().sort("$natural", -1).limit(1).next()["ts"]
    sim.control("no_majority", on=True)
    c.rb.c.insert_one({"_id": 10})
    c.rb.c.update_one({"_id": 0}, {"$set": {"v": 1}})
    c.rb.c.delete_one({"_id": 1})
    with c.start_session() as s:
        with s.start_transaction():
            c.rb.c.insert_one({"_id": 11}, session=s)
            c.rb.c.update_one({"_id": 2}, {"$set": {"v": 2}}, session=s)
    c.rb.fresh.insert_one({"_id": 1})
    return point


def test_rollback_undoes_writes_past_the_majority_point(sim):
    """README 'Rollback': the new primary's history ends at the common point (the majority
    point); the old primary's later writes leave the oplog and the data; the term moves on,
    the majority point is released and new writes follow the new history."""
    c = sim.client()
    point = _freeze_and_write(sim, c)
    before = sim.control("status")
    old = next(m["idx"] for m in before["members"] if m["state"] == "PRIMARY")
    past = list(c.local.oplog.rs.find({"ts": {"$gt": point}}))
    assert len(past) >= 5
    r = sim.control("stepdown", rollback=True)
    assert r["elected"] != old
    assert r["rollback"]["entries"] == len(past)
    assert r["rollback"]["documents"] >= 5
    after = sim.control("status")
    assert after["term"] == before["term"] + 1
    c2 = sim.client()
    ents = list(c2.local.oplog.rs.find({"ts": {"$gt": point}}))
    assert [e["o"].get("msg") for e in ents] == ["new primary"]
    assert not any(e["ts"] in [p["ts"] for p in past] for e in ents)
    assert sorted(c2.rb.c.find(), key=lambda d: d["_id"]) == [{"_id": 0, "v": 0}, {"_id": 1, "v": 0},
                                                               {"_id": 2, "v": 0}]
    assert "fresh" not in c2.rb.list_collection_names()
    lw = c2.admin.command("hello")["lastWrite"]
    assert lw["majorityOpTime"] == lw["opTime"]
    c2.rb.c.insert_one({"_id": 20})
    assert c2.local.oplog.rs.find_one({"ns": "rb.c", "o._id": 20})["t"] == after["term"]


def test_majority_reads_and_update_lookup_never_see_uncommitted_writes(sim):
    """Read concern "majority" returns data as of the majority commit point; a change
    stream's updateLookup reads at majority too: neither returns a w:1 write that could
    still be rolled back, while a local read does."""
    c = sim.client()
    c.mr.c.insert_one({"_id": 1, "v": 0})
    with c.mr.c.watch(full_document="updateLookup", max_await_time_ms=200) as s:
        c.mr.c.update_one({"_id": 1}, {"$set": {"v": 1}})
        sim.control("no_majority", on=True)
        c.mr.c.update_one({"_id": 1}, {"$set": {"v": 2}})
        c.mr.c.insert_one({"_id": 2})
        ev = s.next()
        assert ev["updateDescription"]["updatedFields"] == {"v": 1}
        assert ev["fullDocument"] == {"_id": 1, "v": 1}
    maj = c.mr.get_collection("c", read_concern=ReadConcern("majority"))
    assert list(maj.find()) == [{"_id": 1, "v": 1}]
    assert list(maj.aggregate([{"$match": {}}])) == [{"_id": 1, "v": 1}]
    assert sorted(d["_id"] for d in c.mr.c.find()) == [1, 2]
    sim.control("stepdown", rollback=True)
    assert list(sim.client().mr.c.find()) == [{"_id": 1, "v": 1}]


def test_streams_on_the_rolled_back_primary_fail_as_killed_operations(sim):
    """README 'Rollback': the rolling-back node kills all user operations. A getMore waiting
    on a change stream of the old primary fails with 11602 InterruptedDueToReplStateChange;
    a later getMore on another of its cursors finds none: 43 CursorNotFound. Both are
    resumable: pymongo's watch resumes on the new primary with no rolled-back event."""
    c = sim.client(directConnection=False)
    c.ks.c.insert_one({"_id": 0})
    sim.control("no_majority", on=True)
    c.ks.c.insert_one({"_id": 1})
    waiting = c.ks.command("aggregate", "c", pipeline=[{"$changeStream": {}}], cursor={})
    idle = c.ks.command("aggregate", "c", pipeline=[{"$changeStream": {}}], cursor={})
    errs = []

    def blocked():
        try:
            c.ks.command("getMore", waiting["cursor"]["id"], collection="c", maxTimeMS=10000)
        except PyMongoError as e:  # NotMasterError for a state-change code in pymongo 3.11
            errs.append((getattr(e, "details", None) or {}).get("code"))

    t = threading.Thread(target=blocked)
    t.start()
    time.sleep(0.5)
    with c.ks.c.watch(max_await_time_ms=200) as s:
        sim.control("stepdown", rollback=True)
        t.join(15)
        assert errs == [11602]
        with pytest.raises(OperationFailure) as ei:
            c.ks.command("getMore", idle["cursor"]["id"], collection="c")
        assert ei.value.code == 43
        c3 = sim.client()
        c3.ks.c.insert_one({"_id": 2})
        ev = s.next()
        assert ev["documentKey"] == {"_id": 2}


def test_libmongoc_tails_the_new_history(sim, probe):
    """A tailable oplog cursor opened through libmongoc on the old primary fails when the
    rollback kills it; one opened after the rollback from the common point reads the new
    primary's history only."""
    c = sim.client()
    c.lm.c.insert_one({"_id": 0})
    point = c.local.oplog.rs.find().sort("$natural", -1).limit(1).next()["ts"]
    sim.control("noop_interval", seconds=0)
    sim.control("no_majority", on=True)
    p = subprocess.Popen([probe, "oplog", sim.uri, str(point.time), str(point.inc), "5", "15000"],
                         stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.7)
        c.lm.c.insert_one({"_id": 1})
        time.sleep(0.7)
        sim.control("stepdown", rollback=True)
        out, _ = p.communicate(timeout=30)
    finally:
        p.kill()
    lines = out.splitlines()
    assert [json_util.loads(l[6:])["o"] for l in lines if l.startswith("ENTRY ")] == [{"_id": 1}]
    assert any(l.startswith("ERROR ") and l.split()[2] in ("11602", "43") for l in lines), lines
    p = subprocess.Popen([probe, "oplog", sim.uri, str(point.time), str(point.inc), "2", "15000"],
                         stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.7)
        sim.client().lm.c.insert_one({"_id": 2})
        out, _ = p.communicate(timeout=30)
    finally:
        p.kill()
    ents = [json_util.loads(l[6:]) for l in out.splitlines() if l.startswith("ENTRY ")]
    assert p.returncode == 0, out
    assert [e.get("o") for e in ents] == [{"msg": "new primary"}, {"_id": 2}]


def test_rollback_of_a_shard():
    """A shard's replica set rolls back on its own: the shard's writes past its frozen majority
    point leave its oplog and data; the other shard and mongos reads carry on."""
    with MongoSim(topology="sharded", shards=2, noop_interval=1.0) as sim:
        c = sim.client()
        c.admin.command("enableSharding", "sh")
        c.admin.command("shardCollection", "sh.c", key={"_id": 1})
        c.sh.c.insert_one({"_id": 1})
        sim.control("no_majority", shard="shard01", on=True)
        c.sh.c.insert_one({"_id": 2})
        r = sim.control("stepdown", shard="shard01", rollback=True)
        assert r["rollback"]["entries"] >= 1
        assert [d["_id"] for d in c.sh.c.find()] == [1]
        c.sh.c.insert_one({"_id": 3})
        assert sorted(d["_id"] for d in c.sh.c.find()) == [1, 3]


def test_rollback_refuses_what_it_cannot_undo(sim):
    """A collection dropped past the common point cannot be restored from the undo log: the
    control fails with BadValue and nothing changes."""
    c = sim.client()
    c.nd.c.insert_one({"_id": 1})
    sim.control("no_majority", on=True)
    c.nd.c.drop()
    with pytest.raises(RuntimeError):
        sim.control("stepdown", rollback=True)
    assert sim.control("status")["oplog"]["count"] > 0


def test_rollback_can_reuse_the_timestamps_in_a_new_term(sim):
    """With reuse_ts the new primary's clock has not seen the old primary's writes: its
    first entry takes the first rolled-back entry's ts, in the new term, so that a reader
    comparing positions by ts alone would take it for the rolled-back one."""
    c = sim.client()
    c.rt.c.insert_one({"_id": 0})
    sim.control("no_majority", on=True)
    c.rt.c.insert_one({"_id": 1})
    gone = c.local.oplog.rs.find_one({"ns": "rt.c", "o._id": 1})
    r = sim.control("stepdown", rollback=True, reuse_ts=True)
    assert r["rollback"]["first"] == {"t": gone["ts"].time, "i": gone["ts"].inc}
    same = sim.client().local.oplog.rs.find_one({"ts": gone["ts"]})
    assert same["o"] == {"msg": "new primary"} and same["t"] == gone["t"] + 1
