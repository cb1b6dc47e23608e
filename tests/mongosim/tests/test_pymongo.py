"""Replica set, CRUD, oplog and change streams seen through pymongo 3.11."""

import hashlib
import threading
import time

import pymongo
import pytest
from bson.int64 import Int64
from bson.objectid import ObjectId
from bson.timestamp import Timestamp
from pymongo.errors import OperationFailure, DuplicateKeyError

from conftest import MongoSim, dataset, wait_for


def test_hello_primary_and_secondary_fields(shared_sim):
    """mongo-sim-spec §2.2/§2.3 and the manual's `hello` reference: role fields, types,
    electionId = 7fffffff + term, topologyVersion, wire version of the 6.0 profile."""
    c = shared_sim.client()
    h = c.admin.command("hello")
    assert h["isWritablePrimary"] is True and h["secondary"] is False
    assert h["setName"] == "rs0" and h["hosts"] == shared_sim.members
    assert h["me"] == h["primary"] == shared_sim.members[0]
    assert str(h["electionId"]).startswith("7fffffff")
    assert isinstance(h["topologyVersion"]["counter"], Int64)
    assert h["maxWireVersion"] == 17 and h["logicalSessionTimeoutMinutes"] == 30
    assert isinstance(h["operationTime"], Timestamp) and "$clusterTime" in h
    d = pymongo.MongoClient(shared_sim.members[1], directConnection=True, serverSelectionTimeoutMS=5000)
    try:
        h2 = d.admin.command("isMaster")
        assert h2["ismaster"] is False and h2["secondary"] is True
        assert h2["me"] == shared_sim.members[1] and "electionId" not in h2
        with pytest.raises(pymongo.errors.NotMasterError) as ei:
            d.test.c.insert_one({"x": 1})
        assert ei.value.details["code"] == 10107
    finally:
        d.close()


def test_crud_duplicate_key_and_upsert(shared_sim):
    """mongo-sim-spec §4.1 (duplicate-key writeErrors shape) and the CRUD commands of §1.6.4."""
    c = shared_sim.client()
    coll = c.crud.items
    coll.insert_many([{"_id": i, "v": i, "tags": ["a"] if i % 2 else []} for i in range(10)])
    with pytest.raises(DuplicateKeyError) as ei:
        coll.insert_one({"_id": 3})
    assert ei.value.details["keyValue"] == {"_id": 3}
    r = coll.update_many({"v": {"$gte": 5}}, {"$inc": {"v": 100}, "$push": {"tags": "b"}})
    assert r.matched_count == 5 and r.modified_count == 5
    r = coll.update_one({"_id": "new"}, {"$set": {"v": -1}}, upsert=True)
    assert r.upserted_id == "new"
    doc = coll.find_one_and_update({"_id": 1}, {"$set": {"w": 1}, "$unset": {"tags": ""}},
                                   return_document=pymongo.ReturnDocument.AFTER)
    assert doc == {"_id": 1, "v": 1, "w": 1}
    coll.replace_one({"_id": 2}, {"r": True})
    assert coll.find_one({"_id": 2}) == {"_id": 2, "r": True}
    assert coll.delete_many({"v": {"$gt": 100}}).deleted_count == 5
    assert coll.count_documents({}) == 6 and coll.estimated_document_count() == 6
    coll.update_one({"_id": 0}, {"$addToSet": {"tags": {"$each": ["x", "x", "y"]}}, "$rename": {"v": "vv"}})
    assert coll.find_one({"_id": 0}) == {"_id": 0, "tags": ["x", "y"], "vv": 0}


def test_find_filters_sort_projection_batches(shared_sim):
    """mongo-sim-spec §1.7/§1.9: filters on dotted paths, sort, skip, limit, projection,
    batchSize with getMore, and type bracketing of $gt."""
    c = shared_sim.client()
    coll = c.q.docs
    coll.insert_many([{"_id": i, "a": {"b": i % 3}, "s": "k%03d" % i} for i in range(250)])
    coll.insert_one({"_id": "str-id", "a": {"b": 1}})
    assert coll.count_documents({"a.b": 1}) == 84
    got = list(coll.find({"a.b": {"$in": [0, 2]}, "_id": {"$lt": 10}}, {"s": 1, "_id": 0}).sort("s", -1))
    assert got == [{"s": "k%03d" % i} for i in (9, 8, 6, 5, 3, 2, 0)]
    ids = [d["_id"] for d in coll.find({}, batch_size=7).sort("_id", 1).skip(5).limit(30)]
    assert ids == list(range(5, 35))
    # type bracketing: {$gt: 5} never matches a string _id; sort orders numbers before strings
    assert "str-id" not in [d["_id"] for d in coll.find({"_id": {"$gt": 5}})]
    assert [d["_id"] for d in coll.find({}).sort("_id", -1).limit(1)] == ["str-id"]
    assert coll.count_documents({"$or": [{"_id": "str-id"}, {"a.b": {"$exists": False}}]}) == 1


def test_loaded_dataset(tmp_path):
    """--load takes JSON-lines Extended JSON; default namespace <folder>.<stem>."""
    path = dataset("sample_mflix/theaters.json")
    with MongoSim(members=1, load=[path, path + ":other.th"]) as s:
        c = s.client()
        assert c.sample_mflix.theaters.count_documents({}) == 1564
        assert c.other.th.estimated_document_count() == 1564
        d = c.sample_mflix.theaters.find_one({"theaterId": 1003})
        assert d["_id"] == ObjectId("59a47286cfa9a3a73e51e72d")
        assert d["location"]["geo"]["coordinates"] == [-76.512016, 38.29697]


def test_change_event_fields_per_type(shared_sim):
    """Manual `reference/change-events` (insert/update/replace/delete) and mongo-sim-spec
    §3.5-§3.7: field names, wallTime on 6.0, updateDescription with truncatedArrays."""
    c = shared_sim.client()
    coll = c.shop.orders
    with coll.watch(max_await_time_ms=200) as s:
        coll.insert_one({"_id": 1, "status": "new", "note": "gift", "items": [{"q": 2}, {"q": 1}],
                         "addr": {"zip": "0150"}})
        coll.update_one({"_id": 1}, {"$set": {"status": "shipped", "items.0.q": 3, "addr.zip": "0151"},
                                     "$unset": {"note": ""}})
        # a truncation is reported as such for pipeline updates only; a modifier that
        # shrinks an array ($pop, $pull) is logged as the whole array
        coll.update_one({"_id": 1}, [{"$set": {"items": {"$slice": ["$items", 1]}}}])
        coll.update_one({"_id": 1}, {"$pop": {"items": 1}})
        coll.replace_one({"_id": 1}, {"qty": 5})
        coll.delete_one({"_id": 1})
        evs = [s.next() for _ in range(6)]
    ins, upd, trunc, pop, rep, dele = evs
    assert [e["operationType"] for e in evs] == ["insert", "update", "update", "update", "replace",
                                                 "delete"]
    assert trunc["updateDescription"]["truncatedArrays"] == [{"field": "items", "newSize": 1}]
    assert pop["updateDescription"]["updatedFields"] == {"items": []}
    assert pop["updateDescription"]["truncatedArrays"] == []
    assert list(ins.keys()) == ["_id", "operationType", "clusterTime", "wallTime", "fullDocument", "ns", "documentKey"]
    assert ins["ns"] == {"db": "shop", "coll": "orders"} and ins["documentKey"] == {"_id": 1}
    ud = upd["updateDescription"]
    assert ud["updatedFields"] == {"status": "shipped", "items.0.q": 3, "addr.zip": "0151"}
    assert ud["removedFields"] == ["note"]
    assert ud["truncatedArrays"] == []
    assert "fullDocument" not in upd
    assert rep["fullDocument"] == {"_id": 1, "qty": 5}
    assert "fullDocument" not in dele and dele["documentKey"] == {"_id": 1}
    toks = [e["_id"]["_data"] for e in evs]
    assert toks == sorted(toks) and len(set(toks)) == 6


def test_update_lookup_reads_at_reply_time(shared_sim):
    """mongo-sim-spec §3.9: updateLookup shows the document as it is when the event is
    returned; two updates then one getMore show the second state twice."""
    c = shared_sim.client()
    coll = c.shop.lookup
    coll.insert_one({"_id": 1, "n": 0})
    with coll.watch(full_document="updateLookup", max_await_time_ms=200) as s:
        coll.update_one({"_id": 1}, {"$inc": {"n": 1}})
        coll.update_one({"_id": 1}, {"$inc": {"n": 1}})
        a, b = s.next(), s.next()
    assert a["fullDocument"] == {"_id": 1, "n": 2} == b["fullDocument"]
    assert a["updateDescription"]["updatedFields"] == {"n": 1}


def test_stream_levels_and_user_match(shared_sim):
    """Manual `changeStreams` (database and deployment streams) and mongo-sim-spec §3.1:
    database streams see all collections of one db, cluster streams every db but
    admin/config/local; user $match on ns and operationType with $in/$regex/$or."""
    c = shared_sim.client()
    pipeline = [{"$match": {"$or": [{"ns.coll": {"$regex": "^keep"}},
                                    {"operationType": {"$in": ["delete"]}}]}}]
    with c.lvl.watch(max_await_time_ms=200) as dbs, c.watch(pipeline, max_await_time_ms=200) as cls:
        c.lvl.keep1.insert_one({"_id": 1})
        c.lvl.drop1.insert_one({"_id": 2})
        c.other.keep2.insert_one({"_id": 3})
        c.other.x.delete_one({"_id": 99})
        c.other.x.insert_one({"_id": 4})
        c.other.x.delete_one({"_id": 4})
        c.admin.command("ping")
        d = [dbs.next() for _ in range(2)]
        cl = [cls.next() for _ in range(3)]
    assert [(e["ns"]["coll"], e["documentKey"]["_id"]) for e in d] == [("keep1", 1), ("drop1", 2)]
    assert [(e["ns"]["db"], e["operationType"]) for e in cl] == [("lvl", "insert"), ("other", "insert"), ("other", "delete")]


def test_pbrt_advances_without_matching_events(shared_sim):
    """mongo-sim-spec §3.4: postBatchResumeToken is on every batch, including empty ones, and
    advances with writes to other collections and with the periodic no-op."""
    c = shared_sim.client()
    with c.idle.never.watch(max_await_time_ms=100) as s:
        assert s.try_next() is None
        t0 = s.resume_token["_data"]
        c.idle.other.insert_one({"x": 1})
        assert s.try_next() is None
        t1 = s.resume_token["_data"]
        assert t1 > t0
        # no writes at all: the periodic no-op (1 s here) still moves the token
        time.sleep(2.2)
        assert s.try_next() is None
        assert s.resume_token["_data"] > t1


def test_resume_after_token_and_start_at_operation_time(shared_sim):
    """mongo-sim-spec §3.3: resumeAfter returns the events after the token; startAfter;
    startAtOperationTime includes events at that time."""
    c = shared_sim.client()
    coll = c.res.c
    with coll.watch(max_await_time_ms=200) as s:
        for i in range(5):
            coll.insert_one({"_id": i})
        evs = [s.next() for _ in range(5)]
    with coll.watch(resume_after=evs[1]["_id"], max_await_time_ms=200) as s2:
        assert [s2.next()["documentKey"]["_id"] for _ in range(3)] == [2, 3, 4]
    with coll.watch(start_after=evs[3]["_id"], max_await_time_ms=200) as s3:
        assert s3.next()["documentKey"]["_id"] == 4
    with coll.watch(start_at_operation_time=evs[2]["clusterTime"], max_await_time_ms=200) as s4:
        assert s4.next()["documentKey"]["_id"] == 2


def test_invalidate_on_drop_and_rename(shared_sim):
    """Manual `reference/change-events/invalidate` and mongo-sim-spec §3.10: drop then
    invalidate closes a collection stream; a database stream only gets drop/rename."""
    c = shared_sim.client()
    c.inv.a.insert_one({"_id": 1})
    c.inv.b.insert_one({"_id": 1})
    with c.inv.a.watch(max_await_time_ms=200) as s, c.inv.watch(max_await_time_ms=200) as dbs:
        c.inv.a.drop()
        c.admin.command("renameCollection", "inv.b", to="inv.b2")
        d, inv = s.next(), s.next()
        assert d["operationType"] == "drop" and inv["operationType"] == "invalidate"
        assert inv["_id"]["_data"] > d["_id"]["_data"]
        assert not s.alive or s.try_next() is None
        e1, e2 = dbs.next(), dbs.next()
        assert (e1["operationType"], e2["operationType"]) == ("drop", "rename")
        assert e2["to"] == {"db": "inv", "coll": "b2"}
    with pytest.raises(OperationFailure) as ei:
        c.inv.a.watch(resume_after=inv["_id"])
    assert ei.value.code == 260
    with c.inv.a.watch(start_after=inv["_id"], max_await_time_ms=200) as s2:
        c.inv.a.insert_one({"_id": 7})
        assert s2.next()["documentKey"] == {"_id": 7}


def test_oplog_tail_with_pymongo(shared_sim):
    """mongo-sim-spec §5.2/§5.6: one entry per write with op/ns/ui/o/o2/ts/t/v/wall; a
    tailable awaitData cursor on local.oplog.rs with {ts: {$gt}} waits for new entries."""
    c = shared_sim.client()
    last = c.local.oplog.rs.find().sort("$natural", -1).limit(1).next()
    cur = c.local.oplog.rs.find({"ts": {"$gt": last["ts"]}}, cursor_type=pymongo.CursorType.TAILABLE_AWAIT,
                                oplog_replay=True).max_await_time_ms(300)

    def later():
        time.sleep(0.3)
        c.tail.x.insert_one({"_id": 1, "v": 1})
        c.tail.x.update_one({"_id": 1}, {"$set": {"v": 2}})
        c.tail.x.delete_one({"_id": 1})

    th = threading.Thread(target=later)
    th.start()
    got = []
    deadline = time.time() + 10
    while len(got) < 4 and time.time() < deadline:
        for e in cur:
            if e["op"] != "n":
                got.append(e)
    th.join(10)
    assert [e["op"] for e in got] == ["c", "i", "u", "d"]
    ins, upd = got[1], got[2]
    assert ins["o"] == {"_id": 1, "v": 1} and ins["o2"] == {"_id": 1} and ins["ns"] == "tail.x"
    assert upd["o"] == {"$v": 2, "diff": {"u": {"v": 2}}} and isinstance(upd["t"], Int64)
    assert list(ins.keys())[:4] == ["op", "ns", "ui", "o"]


def test_retryable_write_entries_carry_the_session(shared_sim):
    """mongo-sim-spec §5.1: a retryable write's entries (pymongo retries writes by default)
    carry lsid {id, uid}, txnNumber (int64), stmtId (int32, the statement's index) and a
    prevOpTime chain through the command's earlier entries, as a real server's do
    (oplog_entry.idl); a write without txnNumber carries none; change events stay without
    lsid/txnNumber (§3.6)."""
    c = shared_sim.client()
    with c.rw.x.watch(max_await_time_ms=200) as s:
        c.rw.x.insert_many([{"_id": 1}, {"_id": 2}, {"_id": 3}])
        evs = [s.next() for _ in range(3)]
    assert all("lsid" not in e and "txnNumber" not in e for e in evs)
    es = list(c.local.oplog.rs.find({"ns": "rw.x", "op": "i"}).sort("$natural", 1))
    assert [e["stmtId"] for e in es] == [0, 1, 2]
    assert len({e["txnNumber"] for e in es}) == 1 and isinstance(es[0]["txnNumber"], int)
    assert es[0]["lsid"]["uid"] == hashlib.sha256(b"").digest()
    assert es[0]["prevOpTime"] == {"ts": Timestamp(0, 0), "t": -1}
    assert es[1]["prevOpTime"] == {"ts": es[0]["ts"], "t": es[0]["t"]}
    assert es[2]["prevOpTime"] == {"ts": es[1]["ts"], "t": es[1]["t"]}
    nr = shared_sim.client(retryWrites=False)
    try:
        nr.rw.y.insert_one({"_id": 1})
        e = c.local.oplog.rs.find_one({"ns": "rw.y"})
        assert not {"lsid", "txnNumber", "stmtId", "prevOpTime"} & set(e)
    finally:
        nr.close()


def test_transaction_events_share_cluster_time(shared_sim):
    """mongo-sim-spec §5.4/§7: a committed transaction is one applyOps entry; its events carry
    lsid/txnNumber before _id, share clusterTime and order by txnOpIndex; aborts emit nothing."""
    c = shared_sim.client()
    c.txn.a.insert_one({"_id": 0})
    c.txn.b.insert_one({"_id": 0})
    with c.txn.watch(max_await_time_ms=200) as s:
        with c.start_session() as sess:
            with sess.start_transaction():
                c.txn.a.insert_one({"_id": 1}, session=sess)
                c.txn.b.update_one({"_id": 0}, {"$set": {"x": 1}}, session=sess)
                assert c.txn.a.count_documents({}) == 1  # uncommitted write invisible outside
                c.txn.a.delete_one({"_id": 0}, session=sess)
            sess.start_transaction()
            c.txn.a.insert_one({"_id": "aborted"}, session=sess)
            sess.abort_transaction()
        c.txn.a.insert_one({"_id": "after"})
        evs = [s.next() for _ in range(4)]
    assert [e["operationType"] for e in evs] == ["insert", "update", "delete", "insert"]
    t = evs[:3]
    assert len({e["clusterTime"] for e in t}) == 1
    assert all(list(e.keys())[:3] == ["txnNumber", "lsid", "_id"] for e in t)
    assert "lsid" not in evs[3] and evs[3]["documentKey"] == {"_id": "after"}
    assert [e["_id"]["_data"] for e in t] == sorted(e["_id"]["_data"] for e in t)
    entry = c.local.oplog.rs.find_one({"o.applyOps": {"$exists": True}})
    assert entry["ns"] == "admin.$cmd" and len(entry["o"]["applyOps"]) == 3


def test_positional_updates_and_array_filters(shared_sim):
    """Manual `$ (update)`, `$[]`, `$[<identifier>]` with arrayFilters: the element paths they
    resolve to appear in the update event's updatedFields (mongo-sim-spec §3.7)."""
    c = shared_sim.client()
    coll = c.pos.c
    coll.insert_one({"_id": 1, "items": [{"sku": "a", "q": 1}, {"sku": "b", "q": 5}, {"sku": "c", "q": 9}]})
    with coll.watch(max_await_time_ms=200) as s:
        coll.update_one({"_id": 1, "items.sku": "b"}, {"$set": {"items.$.q": 6}})
        coll.update_one({"_id": 1}, {"$inc": {"items.$[].q": 1}})
        coll.update_one({"_id": 1}, {"$set": {"items.$[big].flag": True}}, array_filters=[{"big.q": {"$gt": 6}}])
        a, b, d = s.next(), s.next(), s.next()
    assert a["updateDescription"]["updatedFields"] == {"items.1.q": 6}
    assert b["updateDescription"]["updatedFields"] == {"items.0.q": 2, "items.1.q": 7, "items.2.q": 10}
    assert d["updateDescription"]["updatedFields"] == {"items.1.flag": True, "items.2.flag": True}


def test_pipeline_updates(shared_sim):
    """mongo-sim-spec §3.7 last paragraph: pipeline-style updates are logged as a diff (an
    update event) when small, or as a full replacement (a replace event) when the diff would
    be larger than the document."""
    c = shared_sim.client()
    coll = c.pipe.c
    coll.insert_one({"_id": 1, "a": 1, "b": "x" * 50})
    with coll.watch(max_await_time_ms=200) as s:
        coll.update_one({"_id": 1}, [{"$set": {"c": "$a"}}])
        coll.update_one({"_id": 1}, [{"$replaceWith": {"_id": "$_id", "z": {"$literal": "y" * 60}, "w": 1}}])
        a, b = s.next(), s.next()
    assert a["operationType"] == "update" and a["updateDescription"]["updatedFields"] == {"c": 1}
    assert b["operationType"] == "replace" and b["fullDocument"] == {"_id": 1, "z": "y" * 60, "w": 1}
