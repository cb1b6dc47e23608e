"""Fidelity fixes found by running Debezium's MongoDB connector against the simulator, each
checked through pymongo 3.11 and, where a C client sees it differently, libmongoc 1.23:
KeyString of Int64 -2^63 in resume tokens (server key_string.cpp: -2^63 has no positive int64,
so it is written as a large-magnitude double), binary subtypes kept as sent (BSON spec: subtype
3 is the legacy UUID, 4 the standard one), `startAtOperationTime` before the oldest oplog entry
(286 ChangeStreamHistoryLost, manual "Change Events" / mongo-sim-spec §3.3) and the aggregation
expressions of pipeline-style updates (manual "Updates with Aggregation Pipeline")."""

import datetime
import json
import subprocess
import uuid

import pytest
from bson.binary import Binary
from bson.codec_options import CodecOptions
from bson.binary import UuidRepresentation
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.timestamp import Timestamp
from pymongo.errors import OperationFailure

from conftest import MongoSim, run_probe, wait_for
import simtoken

MIN64 = Int64(-(2 ** 63))


def test_int64_min_id_in_change_stream_and_resume(shared_sim):
    """An _id of Int64 -2^63 gets a resume token; the stream goes on and resumes after it."""
    c = shared_sim.client()
    coll = c.fid.minid
    with coll.watch(max_await_time_ms=200) as s:
        coll.insert_one({"_id": MIN64, "v": 1})
        coll.insert_one({"_id": Int64(2 ** 63 - 1), "v": 2})
        coll.insert_one({"_id": -1.5e300, "v": 3})
        evs = [s.next() for _ in range(3)]
    assert [e["documentKey"]["_id"] for e in evs] == [MIN64, 2 ** 63 - 1, -1.5e300]
    assert isinstance(evs[0]["documentKey"]["_id"], Int64)
    with coll.watch(resume_after=evs[0]["_id"], max_await_time_ms=200) as s:
        assert s.next()["documentKey"]["_id"] == 2 ** 63 - 1


def test_keystring_large_magnitudes_sort_in_value_order():
    """key_string.cpp: -inf < Int64 -2^63 < -(2^63-1) < ... < 2^63-1 < 2.0^63 < +inf."""
    tb = simtoken._TypeBits()
    vals = [float("-inf"), MIN64, Int64(-(2 ** 63) + 1), -1, 0, Int64(2 ** 63 - 1), 2.0 ** 63,
            1e300, float("inf")]
    enc = [simtoken.ks_value(v, tb) for v in vals]
    assert enc == sorted(enc)
    assert enc[1].hex() == "1f783fffffffffffff"  # -(2^63) as a large negative double
    assert simtoken.ks_value(Decimal128("NaN"), tb) == b"\x1e"


def test_int64_min_id_through_libmongoc(shared_sim, probe):
    """libmongoc's change stream caches the event's token and resumes after it."""
    c = shared_sim.client()
    p = subprocess.Popen([probe, "watch", shared_sim.uri, "2", "10000"], stdout=subprocess.PIPE,
                         text=True)
    try:
        wait_for(lambda: sum(shared_sim.control("counters")["open_change_streams"].values()) >= 1)
        c.fid.cminid.insert_one({"_id": MIN64})
        c.fid.cminid.insert_one({"_id": 5})
        out, _ = p.communicate(timeout=20)
    finally:
        p.kill()
    assert p.returncode == 0, out
    evs = [json.loads(l[6:]) for l in out.splitlines() if l.startswith("EVENT ")]
    assert [e["documentKey"]["_id"] for e in evs] == [{"$numberLong": "-9223372036854775808"},
                                                      {"$numberInt": "5"}]
    rc, lines, err = run_probe(probe, "watch", shared_sim.uri, 1, 10000,
                               json.dumps({"_data": evs[0]["_id"]["_data"]}))
    assert rc == 0, (lines, err)
    assert [json.loads(l[6:])["documentKey"]["_id"] for l in lines if l.startswith("EVENT ")] == \
        [{"$numberInt": "5"}]


def test_binary_subtypes_round_trip(shared_sim):
    """BSON binary subtypes come back as sent: 3 (legacy UUID) stays 3, 4 stays 4."""
    c = shared_sim.client()
    coll = c.fid.bins
    b3 = Binary(bytes(range(16)), 3)
    b4 = Binary(bytes(range(16, 32)), 4)
    coll.insert_one({"_id": 1, "legacy": b3, "std": b4, "u": uuid.UUID(int=7), "b0": Binary(b"x", 0)})
    opts = CodecOptions(uuid_representation=UuidRepresentation.UNSPECIFIED)
    d = coll.with_options(codec_options=opts).find_one({"_id": 1})
    assert d["legacy"] == b3 and d["legacy"].subtype == 3
    assert d["std"] == b4 and d["std"].subtype == 4
    assert d["u"] == Binary(uuid.UUID(int=7).bytes, 4)
    assert d["b0"] == b"x"
    # queries on a subtype-3 value match it, not its subtype-4 twin
    assert coll.count_documents({"legacy": b3}) == 1
    assert coll.count_documents({"legacy": Binary(bytes(range(16)), 4)}) == 0
    with coll.with_options(codec_options=opts).watch(max_await_time_ms=200) as s:
        coll.insert_one({"_id": b3})
        ev = s.next()
    assert ev["documentKey"]["_id"].subtype == 3


def test_binary_subtype_3_through_libmongoc(shared_sim, probe):
    """libmongoc sees a subtype-3 binary of an update's updatedFields as subtype 03."""
    c = shared_sim.client()
    c.fid.cbins.insert_one({"_id": 1, "legacy": Binary(bytes(range(16)), 3)})
    p = subprocess.Popen([probe, "watch", shared_sim.uri, "1", "10000"], stdout=subprocess.PIPE,
                         text=True)
    try:
        wait_for(lambda: sum(shared_sim.control("counters")["open_change_streams"].values()) >= 1)
        c.fid.cbins.update_one({"_id": 1}, {"$set": {"again": Binary(bytes(range(16)), 3)}})
        out, _ = p.communicate(timeout=20)
    finally:
        p.kill()
    assert p.returncode == 0, out
    ev = [json.loads(l[6:]) for l in out.splitlines() if l.startswith("EVENT ")][0]
    assert ev["updateDescription"]["updatedFields"]["again"]["$binary"]["subType"] == "03"


def test_start_at_operation_time_before_the_oplog_is_history_lost():
    """mongo-sim-spec §3.3: a start time before the oldest oplog entry fails with 286 and the
    NonResumableChangeStreamError label, even when the oldest entry is the set's initiation."""
    with MongoSim(topology="replset", members=1, noop_interval=0) as s:
        c = s.client()
        c.fid.h.insert_one({"_id": 1})
        with pytest.raises(OperationFailure) as ei:
            c.fid.h.watch(start_at_operation_time=Timestamp(1, 1), max_await_time_ms=100)
        assert ei.value.code == 286
        assert "NonResumableChangeStreamError" in (ei.value.details or {}).get("errorLabels", [])
        first = next(c.local["oplog.rs"].find().sort("$natural", 1).limit(1))["ts"]
        with c.fid.h.watch(start_at_operation_time=first, max_await_time_ms=100) as st:
            assert st.next()["documentKey"]["_id"] == 1


def test_pipeline_update_expressions(shared_sim):
    """Manual "Updates with Aggregation Pipeline": arithmetic, string, conditional and array
    expressions, with the server's numeric widening."""
    c = shared_sim.client()
    coll = c.fid.pipe
    t0 = datetime.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=datetime.timezone.utc)
    coll.insert_one({"_id": 1, "n": 2, "big": 2 ** 31 - 1, "l": Int64(5), "x": 1.5,
                     "d": Decimal128("1.10"), "s": "  Hello ", "tags": ["a", "b", "c"],
                     "qty": [1, 2, 3], "at": t0, "gone": 1})
    coll.update_one({"_id": 1}, [
        {"$set": {
            "add": {"$add": ["$n", 3]},
            "over": {"$add": ["$big", 1]},
            "long": {"$multiply": ["$l", 2]},
            "dbl": {"$subtract": ["$x", "$n"]},
            "dec": {"$add": ["$d", 1]},
            "div": {"$divide": ["$n", 4]},
            "mod": {"$mod": [7, "$n"]},
            "later": {"$add": ["$at", 1000]},
            "span": {"$subtract": [{"$add": ["$at", 2500]}, "$at"]},
            "up": {"$toUpper": {"$trim": {"input": "$s"}}},
            "cat": {"$concat": ["$tags.0", "-", {"$toString": "$n"}]},
            "sub": {"$substrCP": ["Hello", 1, 3]},
            "len": {"$strLenCP": "$s"},
            "cond": {"$cond": [{"$gte": ["$n", 2]}, "big", "small"]},
            "sw": {"$switch": {"branches": [{"case": {"$eq": ["$n", 1]}, "then": "one"},
                                            {"case": {"$eq": ["$n", 2]}, "then": "two"}],
                               "default": "many"}},
            "nul": {"$ifNull": ["$missing", "dflt"]},
            "size": {"$size": "$tags"},
            "second": {"$arrayElemAt": ["$tags", 1]},
            "more": {"$concatArrays": ["$tags", ["d"]]},
            "first2": {"$slice": ["$tags", 2]},
            "doubled": {"$map": {"input": "$qty", "as": "q", "in": {"$multiply": ["$$q", 2]}}},
            "odd": {"$filter": {"input": "$qty", "cond": {"$eq": [{"$mod": ["$$this", 2]}, 1]}}},
            "total": {"$reduce": {"input": "$qty", "initialValue": 0,
                                  "in": {"$add": ["$$value", "$$this"]}}},
            "has": {"$in": ["b", "$tags"]},
            "rnd": {"$round": [2.345, 2]},
            "gone": "$$REMOVE",
        }},
    ])
    d = coll.find_one({"_id": 1})
    assert d["add"] == 5 and type(d["add"]) is int
    assert d["over"] == 2 ** 31 and isinstance(d["over"], Int64)
    assert d["long"] == 10 and isinstance(d["long"], Int64)
    assert d["dbl"] == -0.5
    assert d["dec"] == Decimal128("2.10")
    assert d["div"] == 0.5 and d["mod"] == 1
    assert d["later"] == (t0 + datetime.timedelta(seconds=1)).replace(tzinfo=None)
    assert d["span"] == 2500 and isinstance(d["span"], Int64)
    assert (d["up"], d["cat"], d["sub"], d["len"]) == ("HELLO", "a-2", "ell", 8)
    assert (d["cond"], d["sw"], d["nul"]) == ("big", "two", "dflt")
    assert (d["size"], d["second"], d["more"], d["first2"]) == (3, "b", ["a", "b", "c", "d"],
                                                                ["a", "b"])
    assert (d["doubled"], d["odd"], d["total"], d["has"]) == ([2, 4, 6], [1, 3], 6, True)
    assert d["rnd"] == 2.34  # half to even, as the manual's $round examples
    assert "gone" not in d
    with pytest.raises(OperationFailure) as ei:
        coll.update_one({"_id": 1}, [{"$set": {"z": {"$noSuchOp": 1}}}])
    assert ei.value.code == 168


def test_undefined_is_stored_and_served_as_undefined(shared_sim):
    """BSON spec: type 0x06 (undefined, deprecated) is a type of its own; the server keeps it
    (it is not null), in documents and in change events."""
    import struct
    from bson.raw_bson import RawBSONDocument

    def raw_doc(i):
        body = b"\x10_id\x00" + struct.pack("<i", i) + b"\x06u\x00" + b"\x0an\x00"
        return RawBSONDocument(struct.pack("<i", len(body) + 5) + body + b"\x00")

    c = shared_sim.client()
    coll = c.fid.undef
    raw = coll.with_options(codec_options=CodecOptions(document_class=RawBSONDocument))
    with raw.watch(max_await_time_ms=200) as s:
        coll.insert_one(raw_doc(1))
        ev = s.next()
    assert b"\x06u\x00" in ev.raw  # fullDocument.u is still undefined
    d = raw.find_one({"_id": 1})
    assert d.raw == raw_doc(1).raw
    # {u: {$type: "undefined"}} finds it; null is not undefined
    assert coll.count_documents({"u": {"$type": 6}}) == 1
    assert coll.count_documents({"n": {"$type": 6}}) == 0
