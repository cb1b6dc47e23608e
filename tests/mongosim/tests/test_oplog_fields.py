"""The fields of the simulator's oplog entries on every server profile, as real servers write
them (src/mongo/db/repl/oplog_entry.idl; mongo-sim-spec.md §5.1), and a $push with $slice as
the update nodes log it (src/mongo/db/update/push_node.cpp)."""

import datetime
import uuid

import pytest
from bson.int64 import Int64

from conftest import MongoSim

PROFILES = ["4.4", "5.0", "6.0", "7.0", "8.0"]


@pytest.mark.parametrize("version", PROFILES)
def test_entry_fields_per_profile(version):
    """Every entry has ts, t (int64: the term), v (int64 2) and wall (a Date); no profile
    writes `h` (pv1 optimes are ts + term; servers from 4.4 on write no `h`, so Debezium
    1.9's source.h is null on all of them); CRUD and create entries carry ui (the
    collection UUID), no-ops do not; updates carry o2 {_id}; inserts carry o2 (the
    document key) from 5.3 on, so on the 6.0+ profiles only; deletes have no o2."""
    with MongoSim(topology="replset", members=3, server_version=version, noop_interval=0.5) as sim:
        c = sim.client()
        term = sim.control("status")["term"]
        c.f.c.insert_one({"_id": 1, "a": 1})
        c.f.c.update_one({"_id": 1}, {"$set": {"a": 2}})
        c.f.c.delete_one({"_id": 1})
        ents = list(c.local.oplog.rs.find())
        assert ents
        for e in ents:
            assert "h" not in e, e
            assert isinstance(e["t"], Int64)
            assert isinstance(e["v"], Int64) and e["v"] == 2
            assert isinstance(e["wall"], datetime.datetime) and e["wall"].microsecond % 1000 == 0
            if e["op"] == "n":
                assert "ui" not in e
        mine = [e for e in ents if e["ns"] in ("f.c", "f.$cmd")]
        assert [e["op"] for e in mine] == ["c", "i", "u", "d"]
        for e in mine:
            assert isinstance(e["ui"], uuid.UUID) and e["t"] == term
        create, ins, upd, dele = mine
        assert upd["o2"] == {"_id": 1}
        if version in ("6.0", "7.0", "8.0"):
            assert ins["o2"] == {"_id": 1}
        else:
            assert "o2" not in ins
        assert "o2" not in dele


@pytest.mark.parametrize("version", ["5.0", "6.0", "8.0"])
def test_push_slice_is_logged_as_the_whole_array(version):
    """$push {$each: [], $slice: 2} on a 4-element array: PushNode::performPush pops the
    extra elements and returns kNormalUpdate, and PushNode::logUpdate logs a normal update
    as the whole new array (logUpdatedField), not as an array truncation. So the $v: 2
    diff is u: {arr: [1, 2]} and the change event reports updatedFields {arr: [1, 2]} with
    an empty truncatedArrays; a diff `l` (truncatedArrays) comes from pipeline updates,
    whose diff is computed from the documents (doc_diff::computeOplogDiff)."""
    with MongoSim(topology="replset", members=3, server_version=version) as sim:
        c = sim.client()
        # padding: a pipeline update's diff must be smaller than the document, or it is
        # logged as a replacement
        c.p.c.insert_one({"_id": 1, "arr": [1, 2, 3, 4], "pad": "x" * 200})
        with c.p.c.watch(max_await_time_ms=200) as s:
            c.p.c.update_one({"_id": 1}, {"$push": {"arr": {"$each": [], "$slice": 2}}})
            c.p.c.update_one({"_id": 1}, [{"$set": {"arr": {"$slice": ["$arr", 1]}}}])
            ev1, ev2 = s.next(), s.next()
        assert ev1["updateDescription"]["updatedFields"] == {"arr": [1, 2]}
        assert ev1["updateDescription"]["truncatedArrays"] == []
        assert ev2["updateDescription"]["truncatedArrays"] == [{"field": "arr", "newSize": 1}]
        assert ev2["updateDescription"]["updatedFields"] == {}
        assert ev2["operationType"] == "update"
        ent = c.local.oplog.rs.find_one({"ns": "p.c", "op": "u"})
        assert ent["o"] == {"$v": 2, "diff": {"u": {"arr": [1, 2]}}}
