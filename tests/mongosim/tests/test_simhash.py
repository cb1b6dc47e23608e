"""Hashed shard keys (mongo-sim-spec §6.3): the simulator's hash64 gives the values of
MongoDB's own src/mongo/db/hasher_test.cpp (BSONElementHasher::hash64, seed 0), so chunk
bounds of a hashed-sharded collection match a real cluster's; documents are placed and
migrated by that hash."""
import math

import pymongo
from bson.binary import Binary
from bson.code import Code
from bson.dbref import DBRef
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.objectid import ObjectId
from bson.regex import Regex
from bson.timestamp import Timestamp
import datetime

from conftest import MongoSim

import simhash

VECTORS = [
    (42, -944302157085130861), (42.123, -944302157085130861), (Int64(42), -944302157085130861),
    (0, 4854801880128277513), (0.456, 4854801880128277513), (Int64(0), 4854801880128277513),
    (math.nan, 4854801880128277513),
    (1, 5902408780260971510), (1.987, 5902408780260971510), (Int64(1), 5902408780260971510),
    (-1, 1140205862565771219), (-1.789, 1140205862565771219), (Int64(-1), 1140205862565771219),
    (-2**31, 6165898260261354870), (float(-2**31), 6165898260261354870), (Int64(-2**31), 6165898260261354870),
    (2**31 - 1, 1143184177162245883), (float(2**31 - 1), 1143184177162245883),
    (Int64(2**31 - 1), 1143184177162245883),
    (1.7976931348623157e308, 921523596458303250), (Int64(2**63 - 1), 921523596458303250),
    (-1.7976931348623157e308, 4532067210535695462), (Int64(-2**63), 4532067210535695462),
    (Decimal128("42"), -944302157085130861), (Decimal128("41.5"), -944302157085130861),
    (Decimal128("42.5"), -944302157085130861), (Decimal128("0.5"), 4854801880128277513),
    (Decimal128("1E+30"), 921523596458303250), (Decimal128("-Infinity"), 4532067210535695462),
    (9223372036854775808.0, 4532067210535695462),
    (MinKey(), 7961148599568647290), (MaxKey(), 5504842513779440750),
    (None, 2338878944348059895),
    ("abc", 8478485326885698097), ("", 2049396243249673340),
    ({"a": "abc", "b": Int64(123)}, 4771603801758380216), ({}, 7980500913326740417),
    (["bar", "baz", "qux"], -2938911267422831539), ([], 8849948234993459283),
    (Binary(bytes([0, 1, 2, 3, 4, 6]), 0), 7252465090394235301),
    (Binary(bytes([0, 1, 2, 3, 4, 6]), 0x80), 5736670452907618262),
    (Binary(bytes(range(16)), 4), 6084661258071355978),
    (ObjectId("010203040506070809101112"), -5588663249627035708),
    (ObjectId("000000000000000000000000"), -4293118519463489418),
    (True, 6405873908747105701), (False, 6289544573401934092),
    (datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc), -1178696894582842035),
    (Timestamp(0x55667788, 0x11223344), 4476222765095560467), (Timestamp(0, 0), -1178696894582842035),
    (Regex("mongodb", ""), -7275792090268217043), (Regex(".*", "i"), 7095855029187981886),
    (Code("func f() { return 1; }"), 6861638109178014270),
    (Code("func f() { return 1; }", {"c": True}), 501342939894575968),
]


def test_hash64_matches_mongodb_hasher_test():
    """hasher_test.cpp's experimentally determined values (DBRef/DBPointer and the
    Date_t(0x5566778811223344) case are in the C unit test, test_hashkey)."""
    for value, expected in VECTORS:
        assert simhash.hash64(value) == expected, repr(value)
    # numbers squash inside documents and arrays too
    assert simhash.hash64({"a": 3, "b": [3.1, {"c": 3}]}) == simhash.hash64({"a": 3.1, "b": [3, {"c": 3.0}]})
    assert simhash.hash64(4, 0) != simhash.hash64(4, 1)


def test_hashed_sharding_places_documents_by_hash():
    """shardCollection {k: "hashed"}; split at NumberLong(0) (split's middle is a hash
    value, as on a real cluster); moveChunk by a document's key (find: hashed by the
    server): each document lies on the shard whose chunk holds hash64(k)."""
    with MongoSim(topology="sharded", shards=2, members=1, noop_interval=0.5) as s:
        c = s.client()
        c.admin.command("enableSharding", "h")
        c.admin.command("shardCollection", "h.c", key={"k": "hashed"})
        c.admin.command("split", "h.c", middle={"k": Int64(0)})
        neg = next(i for i in range(100) if simhash.hash64(i) < 0)
        c.admin.command("moveChunk", "h.c", find={"k": neg}, to="shard02")
        c.h.c.insert_many([{"_id": i, "k": i} for i in range(40)])
        d1 = pymongo.MongoClient(s.shard_uris["shard01"], serverSelectionTimeoutMS=5000)
        d2 = pymongo.MongoClient(s.shard_uris["shard02"], serverSelectionTimeoutMS=5000)
        try:
            on1 = sorted(d["_id"] for d in d1.h.c.find({}))
            on2 = sorted(d["_id"] for d in d2.h.c.find({}))
            assert on1 == [i for i in range(40) if simhash.hash64(i) >= 0]
            assert on2 == [i for i in range(40) if simhash.hash64(i) < 0]
            cfg = pymongo.MongoClient(s.config_uri, serverSelectionTimeoutMS=5000)
            try:
                chunks = list(cfg.config.chunks.find({}, sort=[("min", 1)]))
            finally:
                cfg.close()
            assert [(ch["min"]["k"], ch["max"]["k"], ch["shard"]) for ch in chunks] == [
                (MinKey(), 0, "shard02"), (0, MaxKey(), "shard01")]
            assert isinstance(chunks[0]["max"]["k"], Int64)
            assert c.h.c.find_one({"k": neg})["_id"] == neg  # targeted read by the hash
        finally:
            d1.close()
            d2.close()
