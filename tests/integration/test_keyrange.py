"""`_id` key ranges by BSON type bracket (src/snapshot/keyrange.h) against the
simulator, or a real MongoDB with MONGO_TEST_URI, read through the C walker
(tests/unit/keyrange_walk.c: libmongoc) and checked through pymongo.

MongoDB's query operators compare within one type bracket only, while
sort({_id: 1}) orders across brackets ("Comparison/Sort Order" in the manual):
a chunked read that pages with {_id: {$gt: last}} alone skips every `_id` of
another type. The walker reads bracket by bracket (max key, then chunks of
{$type, $gt, $lte}), so it must return every key exactly once, in the order of
the server's own sort. Also checked: each bracket's filter returns exactly the
documents of that bracket, an additional condition filters every chunk, and
the simulator does what MongoDB does for NaN (no range matches it) and for a
regex `_id` (refused).
"""

import datetime
import os
import subprocess

import bson
import pytest
from bson import json_util
from bson.binary import Binary, UuidRepresentation
from bson.code import Code
from bson.codec_options import CodecOptions
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.objectid import ObjectId
from bson.regex import Regex
from bson.timestamp import Timestamp

from conftest import BUILD_DIR
from pipeline_support import Sim

CODEC = CodecOptions(uuid_representation=UuidRepresentation.UNSPECIFIED)
JSON_OPTS = json_util.JSONOptions(json_mode=json_util.JSONMode.CANONICAL,
                                  uuid_representation=UuidRepresentation.UNSPECIFIED)
DB, COLL = "kr", "mixed"


def every_type_ids():
    """One collection's worth of `_id`s of every type an `_id` may have."""
    utc = datetime.timezone.utc
    ids = [
        MinKey(), MaxKey(), None, float("nan"),
        # numbers of all four types, distinct by value (1 == 1.0 would be a duplicate key)
        -5, 0, 7, 2 ** 31 - 1, Int64(-(2 ** 63)), Int64(2 ** 53 + 1), Int64(2 ** 40),
        -0.5, 1.5, 3.25, float("inf"), float("-inf"), 2.0 ** 53,
        Decimal128("0.1"), Decimal128("-2.5"), Decimal128("1.000000000000000000000000000000001"),
        Decimal128("1E+400"), Decimal128("-1E-400"),
        "", "a", "ab", "Z", "\u00e9", "zzz", "10",
        {}, {"a": 1}, {"a": 1, "b": 2}, {"a": 2}, {"b": 0}, {"a": "x"}, {"a": {"b": [1, 2]}},
        ObjectId("000000000000000000000001"), ObjectId("5f5f5f5f5f5f5f5f5f5f5f5f"),
        ObjectId("ffffffffffffffffffffffff"),
        True, False,
        datetime.datetime(1969, 7, 20, 20, 17, tzinfo=utc), datetime.datetime(1970, 1, 1, tzinfo=utc),
        datetime.datetime(2024, 2, 29, 12, 0, 0, 123000, tzinfo=utc),
        Timestamp(1, 1), Timestamp(1, 2), Timestamp(4000000000, 7),
        Code("a"), Code("b"), Code("a", {"x": 1}), Code("b", {"x": 0}),
    ]
    # every binary subtype (7 and 9, column and vector, are validated by recent servers)
    for st, data in [(0, b""), (0, b"\x00"), (0, b"\xff\xff"), (1, b"fn"), (2, b"old"),
                     (3, b"0123456789abcdef"), (4, b"fedcba9876543210"), (5, b"0123456789abcdef"),
                     (6, b"enc"), (8, b"secret"), (0x80, b"user")]:
        ids.append(Binary(data, st))
    return ids


def bracket_of(v):
    """The bracket of a key, written independently of the simulator's ordering code."""
    if isinstance(v, MinKey):
        return "minKey"
    if isinstance(v, MaxKey):
        return "maxKey"
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, float) and v != v:
        return "nan"
    if isinstance(v, Decimal128) and v.to_decimal().is_nan():
        return "nan"
    if isinstance(v, (int, float, Decimal128)):
        return "number"
    if isinstance(v, Code):  # a str subclass
        return "javascript" if v.scope is None else "javascriptWithScope"
    if isinstance(v, str):
        return "string"
    if isinstance(v, dict):
        return "object"
    if isinstance(v, (Binary, bytes)):  # subtype 0 decodes to bytes
        return "binData"
    if isinstance(v, ObjectId):
        return "objectId"
    if isinstance(v, datetime.datetime):
        return "date"
    if isinstance(v, Timestamp):
        return "timestamp"
    raise AssertionError("no bracket for %r" % (v,))


def enc(v):
    """Byte form of a key: type and value exactly (1 and NumberLong(1) differ)."""
    return bson.encode({"_id": v}, codec_options=CODEC)


@pytest.fixture(scope="module")
def walker():
    p = BUILD_DIR / "tests" / "unit" / "mcdc_keyrange_walk"
    if not p.is_file():
        pytest.fail("%s not built" % p)
    return p


@pytest.fixture(scope="module")
def mixed(tmp_path_factory, mongo_test_uri):
    """(uri, collection) holding one document per `_id` of every_type_ids(), g = index % 2."""
    sim = None
    uri = mongo_test_uri
    if uri is None:
        sim = Sim(tmp_path_factory.mktemp("keyrange"), members=1)
        uri = sim.uri
    from pymongo import MongoClient
    client = MongoClient(uri, serverSelectionTimeoutMS=20000)
    coll = client[DB].get_collection(COLL, codec_options=CODEC)
    coll.drop()
    coll.insert_many([{"_id": v, "g": i % 2} for i, v in enumerate(every_type_ids())])
    yield uri, coll
    client.close()
    if sim is not None:
        sim.stop()


def walk(walker, uri, chunk, extra=None):
    argv = [str(walker), uri, DB, COLL, str(chunk)] + ([extra] if extra else [])
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, MONGOC_DISABLE_SHM="1"))
    assert r.returncode == 0, r.stderr
    lines = []
    for line in r.stdout.splitlines():
        tag, bracket, payload = line.split(" ", 2)
        lines.append((tag, bracket, json_util.loads(payload, json_options=JSON_OPTS)))
    return lines


def server_order(coll, filt=None):
    return [d["_id"] for d in coll.find(filt or {}).sort("_id", 1)]


@pytest.mark.parametrize("chunk", [1, 3, 1000])
def test_walk_returns_every_key_once_in_the_servers_order(walker, mixed, chunk):
    uri, coll = mixed
    lines = walk(walker, uri, chunk)
    keys = [(b, p["_id"]) for t, b, p in lines if t == "K"]
    assert [enc(k) for _, k in keys] == [enc(k) for k in server_order(coll)]
    assert len(keys) == len(every_type_ids())
    for b, k in keys:
        assert b == bracket_of(k), k
    # the brackets come in MongoDB's order, each once
    seen = []
    for b, _ in keys:
        if not seen or seen[-1] != b:
            seen.append(b)
    assert seen == ["minKey", "null", "nan", "number", "string", "object", "binData", "objectId",
                    "bool", "date", "timestamp", "javascript", "javascriptWithScope", "maxKey"]
    if chunk == 1:  # one query per key plus one per bracket for its maximum
        assert sum(1 for t, _, _ in lines if t == "F") >= len(keys) + 18


def test_each_bracket_filter_matches_exactly_that_bracket(walker, mixed):
    uri, coll = mixed
    lines = walk(walker, uri, 4)
    by_bracket = {}
    for v in every_type_ids():
        by_bracket.setdefault(bracket_of(v), []).append(enc(v))
    firsts = {}
    for tag, b, filt in lines:
        if tag != "F":
            continue
        got = [enc(d["_id"]) for d in coll.find(filt)]
        # every filter, bounded or not, stays inside its bracket
        assert all(g in by_bracket.get(b, []) for g in got), (b, filt)
        firsts.setdefault(b, got)
    # the unbounded filter (the max-key query's) is the whole bracket, and every bracket is asked
    assert len(firsts) == 18
    for b, got in firsts.items():
        assert sorted(got) == sorted(by_bracket.get(b, [])), b


def test_additional_condition_filters_every_chunk(walker, mixed):
    uri, coll = mixed
    keys = [p["_id"] for t, _, p in walk(walker, uri, 2, '{"g": 0}') if t == "K"]
    assert [enc(k) for k in keys] == [enc(k) for k in server_order(coll, {"g": 0})]
    assert 0 < len(keys) < len(every_type_ids())


def test_naive_gt_paging_misses_other_types(mixed):
    """Why the brackets: paging with $gt alone stops at the first bracket's end."""
    _, coll = mixed
    first = server_order(coll, {"_id": {"$type": "number", "$gte": float("-inf")}})[0]
    got = [d["_id"] for d in coll.find({"_id": {"$gt": first}}).sort("_id", 1)]
    assert got and all(bracket_of(k) == "number" for k in got)


def test_nan_matches_no_range_and_sorts_below_numbers(mixed):
    """MongoDB's matcher: NaN equals NaN and is neither below nor above any number
    (ComparisonMatchExpression), although sort puts it below -Infinity."""
    _, coll = mixed
    lte = [d["_id"] for d in coll.find({"_id": {"$lte": 5}})]
    assert lte and not any(isinstance(k, float) and k != k for k in lte)
    assert list(coll.find({"_id": {"$gt": float("nan")}})) == []
    assert list(coll.find({"_id": {"$lt": float("nan")}})) == []
    eq = [d["_id"] for d in coll.find({"_id": {"$gte": float("nan")}})]
    assert len(eq) == 1 and eq[0] != eq[0]
    nums = server_order(coll, {"_id": {"$type": "number"}})
    assert nums[0] != nums[0] and nums[1] == float("-inf")


def test_regex_id_refused(mixed):
    """The manual: `_id` may be of any type other than an array or regex."""
    from pymongo.errors import WriteError
    _, coll = mixed
    with pytest.raises(WriteError) as e:
        coll.insert_one({"_id": Regex("^a", "i")})
    assert e.value.code == 2 and "regex" in str(e.value)


def read_spans(walker, uri, points):
    """{span index: [key bytes]} of the spans cut at points (keys, in BSON order)."""
    argv = [str(walker), uri, DB, COLL, "spans"] + [
        json_util.dumps({"_id": p}, json_options=JSON_OPTS) for p in points]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, MONGOC_DISABLE_SHM="1"))
    assert r.returncode == 0, r.stderr
    got = {i: [] for i in range(len(points) + 1)}
    for line in r.stdout.splitlines():
        tag, i, payload = line.split(" ", 2)
        if tag == "K":
            got[int(i)].append(enc(json_util.loads(payload, json_options=JSON_OPTS)["_id"]))
    return got


def test_spans_at_every_key_hold_exactly_that_key(walker, mixed):
    """Cut after every key (singletons, NaN, bracket ends included): span i is exactly the
    i-th key in the server's order, and the span after the last key is empty."""
    uri, coll = mixed
    order = server_order(coll)
    got = read_spans(walker, uri, order)
    for i, k in enumerate(order):
        assert got[i] == [enc(k)], (i, k)
    assert got[len(order)] == []


@pytest.mark.parametrize("step", [2, 5, 13])
def test_spans_partition_the_collection(walker, mixed, step):
    uri, coll = mixed
    order = server_order(coll)
    points = order[step // 2::step]
    got = read_spans(walker, uri, points)
    flat = [k for i in sorted(got) for k in got[i]]
    assert sorted(flat) == sorted(enc(k) for k in order)  # every key once
    assert len(flat) == len(set(flat))
