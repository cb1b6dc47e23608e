"""Sharded topology: config servers, shards, mongos routing and merged change streams
(mongo-sim-spec §6)."""

import subprocess
import time

import pymongo
import pytest
from bson import json_util
from bson.max_key import MaxKey
from bson.min_key import MinKey

from conftest import MongoSim, run_probe, wait_for


@pytest.fixture(scope="module")
def cluster():
    with MongoSim(topology="sharded", shards=2, members=2, noop_interval=0.5) as s:
        yield s


def test_discovery_of_shards_and_config_servers(cluster):
    """mongo-sim-spec §6.1/§6.2 (manual `reference/config-database`, `listShards`,
    `getShardMap`): mongos answers hello with msg isdbgrid; config.shards on the config
    server replica set (configsvr: 2) lists every shard's seed list; shards carry
    shardIdentity."""
    c = cluster.client()
    assert c.admin.command("hello")["msg"] == "isdbgrid"
    shards = c.admin.command("listShards")["shards"]
    assert [s["_id"] for s in shards] == ["shard01", "shard02"]
    assert all(s["state"] == 1 and s["host"].startswith(s["_id"] + "/") for s in shards)
    m = c.admin.command("getShardMap")
    assert m["map"]["config"].startswith("configRepl/")
    st = c.admin.command("serverStatus")
    assert st["sharding"]["configsvrConnectionString"] == m["map"]["config"]
    cfg = pymongo.MongoClient(cluster.config_uri, serverSelectionTimeoutMS=5000)
    try:
        assert cfg.admin.command("hello")["configsvr"] == 2
        assert [d["_id"] for d in cfg.config.shards.find()] == ["shard01", "shard02"]
        assert cfg.config.mongos.count_documents({}) == 1
    finally:
        cfg.close()
    sh = pymongo.MongoClient(cluster.shard_uris["shard02"], serverSelectionTimeoutMS=5000)
    try:
        ident = sh.admin.system.version.find_one({"_id": "shardIdentity"})
        assert ident["shardName"] == "shard02" and ident["configsvrConnectionString"] == m["map"]["config"]
    finally:
        sh.close()


def test_routing_migration_and_per_shard_streams(cluster):
    """mongo-sim-spec §3.8 (documentKey with the shard key), §6.3 (config.chunks), §6.6
    (migration: recipient inserts and donor deletes with fromMigrate, donor no-op
    migrateChunkToNewShard) and §6.5 (per-shard streams never show migrations)."""
    c = cluster.client()
    c.admin.command("shardCollection", "shop.orders", key={"region": 1, "_id": 1})
    s1 = pymongo.MongoClient(cluster.shard_uris["shard01"], serverSelectionTimeoutMS=5000)
    s2 = pymongo.MongoClient(cluster.shard_uris["shard02"], serverSelectionTimeoutMS=5000)
    try:
        w1 = s1.watch(max_await_time_ms=100)
        w2 = s2.watch(max_await_time_ms=100)
        c.shop.orders.insert_many([{"_id": i, "region": r} for i, r in enumerate(["EU", "US", "EU", "US"])])
        c.admin.command("split", "shop.orders", middle={"region": "F", "_id": 0})
        r = c.admin.command("moveChunk", "shop.orders", find={"region": "US", "_id": 0}, to="shard02")
        assert r["moved"] == 2
        c.shop.orders.update_one({"_id": 1, "region": "US"}, {"$set": {"x": 1}})
        ev1 = [w1.next() for _ in range(4)]
        ev2 = w2.next()
        assert all(e["operationType"] == "insert" for e in ev1)
        assert ev1[1]["documentKey"] == {"region": "US", "_id": 1}
        assert ev2["operationType"] == "update" and ev2["documentKey"] == {"region": "US", "_id": 1}
        assert w1.try_next() is None and w2.try_next() is None  # no migration events
        mig = list(s2.local.oplog.rs.find({"fromMigrate": True}))
        assert sorted(e["o"]["_id"] for e in mig if e["op"] == "i") == [1, 3]
        assert s1.local.oplog.rs.count_documents({"op": "d", "fromMigrate": True}) == 2
        assert s1.local.oplog.rs.count_documents({"o2.migrateChunkToNewShard": "shop.orders"}) == 1
        cfg = pymongo.MongoClient(cluster.config_uri, serverSelectionTimeoutMS=5000)
        chunks = list(cfg.config.chunks.find({}, {"_id": 0, "min": 1, "max": 1, "shard": 1}).sort("min", 1))
        cfg.close()
        assert chunks[0] == {"min": {"region": MinKey(), "_id": MinKey()}, "max": {"region": "F", "_id": 0}, "shard": "shard01"}
        assert chunks[1]["shard"] == "shard02" and chunks[1]["max"] == {"region": MaxKey(), "_id": MaxKey()}
        assert sorted(d["_id"] for d in s2.shop.orders.find()) == [1, 3]
        assert c.shop.orders.count_documents({}) == 4
        w1.close()
        w2.close()
    finally:
        s1.close()
        s2.close()


def test_mongos_stream_merges_shards_in_token_order(cluster):
    """mongo-sim-spec §6.4: a mongos stream merges the shards' events by resume token, gated
    by the slowest shard's high-water mark (an idle shard holds events back until its
    periodic no-op), and resumes from its own tokens."""
    c = cluster.client()
    c.admin.command("shardCollection", "m.c", key={"k": 1})
    c.admin.command("split", "m.c", middle={"k": 100})
    c.admin.command("moveChunk", "m.c", find={"k": 100}, to="shard02")
    with c.m.c.watch(max_await_time_ms=1000) as s:
        for k in (1, 150, 2, 151):
            c.m.c.insert_one({"_id": k, "k": k})
        evs = [s.next() for _ in range(4)]
    assert [e["documentKey"]["k"] for e in evs] == [1, 150, 2, 151]
    toks = [e["_id"]["_data"] for e in evs]
    assert toks == sorted(toks)
    with c.m.c.watch(resume_after=evs[1]["_id"], max_await_time_ms=1000) as s2:
        assert [s2.next()["documentKey"]["k"] for _ in range(2)] == [2, 151]


def test_add_and_remove_shard(cluster):
    """mongo-sim-spec §6.2/§6.4: a new shard appears in config.shards and a mongos stream
    reads it from its add time; removeShard drains (draining: true) then removes the
    document."""
    c = cluster.client()
    c.admin.command("enableSharding", "n")  # primary shard chosen before shard03 exists
    with c.watch(max_await_time_ms=1000) as s:
        r = cluster.control("add_shard", members=1)
        name = r["shardAdded"]
        assert name == "shard03"
        assert [x["_id"] for x in c.admin.command("listShards")["shards"]][-1] == "shard03"
        c.admin.command("shardCollection", "n.c", key={"k": 1})
        c.n.c.insert_one({"_id": 1, "k": 1})
        c.admin.command("moveChunk", "n.c", find={"k": 1}, to="shard03")
        c.n.c.update_one({"_id": 1, "k": 1}, {"$set": {"v": 2}})
        ops = []
        while len(ops) < 2:
            ops.append(s.next())
    assert [e["operationType"] for e in ops] == ["insert", "update"]
    r = c.admin.command("removeShard", "shard03")
    assert r["state"] == "started"
    assert c.admin.command("listShards")["shards"][-1]["draining"] is True
    assert c.admin.command("removeShard", "shard03")["state"] == "ongoing"
    c.admin.command("moveChunk", "n.c", find={"k": 1}, to="shard01")
    assert c.admin.command("removeShard", "shard03")["state"] == "completed"
    assert [x["_id"] for x in c.admin.command("listShards")["shards"]] == ["shard01", "shard02"]
    # The removed name comes back with its replica set (control add_shard name=...): a new
    # config.shards document with a later topologyTime, and mongos routes to it again.
    gone = [d for d in c.config.shards.find()]
    r = cluster.control("add_shard", name="shard03")
    assert r["shardAdded"] == "shard03"
    back = c.config.shards.find_one({"_id": "shard03"})
    assert back is not None and "draining" not in back
    assert all(back["topologyTime"] > d["topologyTime"] for d in gone)
    c.admin.command("moveChunk", "n.c", find={"k": 1}, to="shard03")
    c.n.c.update_one({"_id": 1, "k": 1}, {"$set": {"v": 3}})
    assert c.n.c.find_one({"_id": 1})["v"] == 3
    c.admin.command("moveChunk", "n.c", find={"k": 1}, to="shard01")
    assert c.admin.command("removeShard", "shard03")["state"] == "started"
    assert c.admin.command("removeShard", "shard03")["state"] == "completed"


def test_libmongoc_per_shard_stream(cluster, probe):
    """mongo-sim-spec §6.5: the per-shard connector connects to each shard replica set with a
    pooled client and streams its events (cluster-level stream on the shard)."""
    c = cluster.client()
    c.admin.command("enableSharding", "ps")
    prim = c.config.databases.find_one({"_id": "ps"})["primary"]
    uri = cluster.shard_uris[prim]
    p = subprocess.Popen([probe, "watch", uri, "1", "10000"], stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)
        c.ps.c.insert_one({"_id": "x"})
        out, _ = p.communicate(timeout=20)
    finally:
        p.kill()
    evs = [json_util.loads(l[6:]) for l in out.splitlines() if l.startswith("EVENT ")]
    assert p.returncode == 0, out
    assert evs[0]["ns"] == {"db": "ps", "coll": "c"}


def test_faults_on_mongos_and_on_a_shard(cluster):
    """Control targets ("shard": "mongos" or a shard name): an injected resumable error on the
    mongos getMore is resumed by the driver; a shard without a primary makes mongos answer
    6 HostUnreachable (the 5.0+ rewrite of state-change errors, spec §4.6)."""
    c = cluster.client(retryWrites=False)
    with c.fm.c.watch(max_await_time_ms=1000) as s:
        before = cluster.control("counters", shard="mongos")["commands"].get("aggregate", 0)
        cluster.control("fail", shard="mongos", commands=["getMore"], code=6, times=1)
        c.fm.c.insert_one({"_id": 1})
        assert s.next()["documentKey"] == {"_id": 1}
        assert cluster.control("counters", shard="mongos")["commands"]["aggregate"] == before + 1
    prim = c.config.databases.find_one({"_id": "fm"})["primary"]
    cluster.control("stepdown", shard=prim, elect=None)
    try:
        with pytest.raises(pymongo.errors.PyMongoError) as ei:
            c.fm.c.insert_one({"_id": 2})
        assert getattr(ei.value, "code", None) == 6 or "HostUnreachable" in str(ei.value)
    finally:
        cluster.control("elect", shard=prim, member=0)
    c.fm.c.insert_one({"_id": 3})


def test_cross_shard_transaction_prepared_on_each_shard(cluster):
    """mongo-sim-spec §5.4 (prepared transactions) and §6.5 item 5: a transaction through
    mongos touching two shards is logged on each as applyOps prepare: true followed by
    commitTransaction with one commitTimestamp and the same lsid/txnNumber; each shard's
    stream emits its part at the commit entry; the mongos stream shows all of them."""
    c = cluster.client()
    c.admin.command("shardCollection", "tx.c", key={"k": 1})
    c.admin.command("split", "tx.c", middle={"k": 100})
    c.admin.command("moveChunk", "tx.c", find={"k": 100}, to="shard02")
    c.admin.command("moveChunk", "tx.c", find={"k": 1}, to="shard01")
    uid = c.config.collections.find_one({"_id": "tx.c"})["uuid"]
    owner1 = c.config.chunks.find_one({"uuid": uid, "min.k": {"$type": "minKey"}})["shard"]
    s1 = pymongo.MongoClient(cluster.shard_uris["shard01"], serverSelectionTimeoutMS=5000)
    s2 = pymongo.MongoClient(cluster.shard_uris["shard02"], serverSelectionTimeoutMS=5000)
    try:
        w1, w2 = s1.tx.watch(max_await_time_ms=200), s2.tx.watch(max_await_time_ms=200)
        with c.tx.watch(max_await_time_ms=1000) as ms:
            with c.start_session() as sess:
                with sess.start_transaction():
                    c.tx.c.insert_one({"_id": 1, "k": 1}, session=sess)
                    c.tx.c.insert_one({"_id": 2, "k": 150}, session=sess)
                    assert c.tx.c.count_documents({}) == 0
            merged = [ms.next() for _ in range(2)]
        e1, e2 = w1.next(), w2.next()
        w1.close()
        w2.close()
        assert owner1 == "shard01"
        for sh in (s1, s2):
            ents = list(sh.local.oplog.rs.find({"lsid": {"$exists": True}}).sort("$natural", 1))
            assert ents[0]["o"]["prepare"] is True and "commitTransaction" in ents[1]["o"]
            assert ents[1]["prevOpTime"]["ts"] == ents[0]["ts"]
        cts = [sh.local.oplog.rs.find_one({"o.commitTransaction": 1})["o"]["commitTimestamp"] for sh in (s1, s2)]
        assert cts[0] == cts[1]
        assert e1["lsid"] == e2["lsid"] and e1["txnNumber"] == e2["txnNumber"]
        assert (e1["documentKey"], e2["documentKey"]) == ({"k": 1, "_id": 1}, {"k": 150, "_id": 2})
        assert sorted(e["documentKey"]["_id"] for e in merged) == [1, 2]
        assert c.tx.c.count_documents({}) == 2
    finally:
        s1.close()
        s2.close()


def test_shard_collection_expanded_event_on_primary_shard(cluster):
    """mongo-sim-spec §3.6 expanded events and §5.5: shardCollection is a no-op with
    o2.shardCollection on the primary shard, shown as a shardCollection event (with
    operationDescription) only to streams with showExpandedEvents."""
    c = cluster.client()
    c.admin.command("enableSharding", "ex")
    prim = c.config.databases.find_one({"_id": "ex"})["primary"]
    sh = pymongo.MongoClient(cluster.shard_uris[prim], serverSelectionTimeoutMS=5000)
    try:
        r = sh.admin.command("aggregate", 1, pipeline=[{"$changeStream": {"allChangesForCluster": True,
                                                                          "showExpandedEvents": True}}], cursor={})
        cid = r["cursor"]["id"]
        c.admin.command("shardCollection", "ex.c", key={"r": 1})

        def events():
            return sh.admin.command("getMore", cid, collection="$cmd.aggregate", maxTimeMS=300)["cursor"]["nextBatch"] or None

        evs = []
        while not any(e["operationType"] == "shardCollection" for e in evs):
            evs += wait_for(events)
        ev = [e for e in evs if e["operationType"] == "shardCollection"][0]
        assert ev["ns"] == {"db": "ex", "coll": "c"} and ev["operationDescription"]["key"] == {"r": 1}
        assert "collectionUUID" in ev
    finally:
        sh.close()


def test_orphans_until_range_deletion():
    """mongo-sim-spec §6.6 step 3: after a chunk migration the donor keeps the moved
    documents (orphans) until its range deleter runs (orphanCleanupDelaySecs), then deletes
    them with fromMigrate; direct reads on the donor's primary return orphans, reads
    through mongos do not. $expr comparisons follow BSON order across types (no type
    bracketing), which is what a per-shard reader filtering by chunk needs."""
    with MongoSim(topology="sharded", shards=2, members=1, noop_interval=0.5) as s:
        c = s.client()
        c.admin.command("enableSharding", "o")
        c.admin.command("shardCollection", "o.c", key={"_id": 1})
        c.admin.command("split", "o.c", middle={"_id": 10})
        c.o.c.insert_many([{"_id": i} for i in range(20)] + [{"_id": "s"}])
        s.control("orphans", keep=True)
        c.admin.command("moveChunk", "o.c", find={"_id": 15}, to="shard02")
        d1 = pymongo.MongoClient(s.shard_uris["shard01"], serverSelectionTimeoutMS=5000)
        d2 = pymongo.MongoClient(s.shard_uris["shard02"], serverSelectionTimeoutMS=5000)
        try:
            assert d1.o.c.count_documents({}) == 21, "donor keeps orphans"
            assert d2.o.c.count_documents({}) == 11
            assert len(list(c.o.c.find({}))) == 21, "mongos returns each document once"
            owned = {"$expr": {"$and": [{"$gte": [{"$ifNull": ["$_id", None]}, {"$literal": MinKey()}]},
                                        {"$lt": [{"$ifNull": ["$_id", None]}, {"$literal": 10}]}]}}
            assert sorted(d["_id"] for d in d1.o.c.find(owned)) == list(range(10))
            upper = {"$expr": {"$gte": ["$_id", {"$literal": 10}]}}
            assert {"s", 19} <= {d["_id"] for d in d2.o.c.find(upper)}, "strings sort after numbers"
            w1 = d1.watch(max_await_time_ms=100)
            assert s.control("clean_orphans")["deleted"] == 11
            assert d1.o.c.count_documents({}) == 10
            assert w1.try_next() is None, "range deletion is fromMigrate: no event"
            oplog = list(d1.local.oplog.rs.find({"op": "d", "fromMigrate": True}))
            assert len(oplog) == 11
        finally:
            d1.close()
            d2.close()


def test_chunk_history_trimmed_on_migration_and_reset_by_merge():
    """mongo-sim-spec §6.3 config.chunks history as the config server keeps it
    (commitChunkMigration, commitChunksMerge): a migration commit drops the entries older
    than the history window but keeps at least one (the donor's) and puts the recipient's
    in front; mergeChunks leaves the single entry {validAfter: merge time, shard}."""
    with MongoSim(topology="sharded", shards=2, members=1, noop_interval=0) as s:
        c = s.client()
        c.admin.command("enableSharding", "h")
        c.admin.command("shardCollection", "h.c", key={"_id": 1})
        c.admin.command("split", "h.c", middle={"_id": 10})
        c.h.c.insert_many([{"_id": i} for i in range(20)])
        cfg = pymongo.MongoClient(s.config_uri, serverSelectionTimeoutMS=5000)
        try:
            def history(key):
                for ch in cfg.config.chunks.find():
                    lo, hi = ch["min"]["_id"], ch["max"]["_id"]
                    if (lo == MinKey() or lo <= key) and (hi == MaxKey() or key < hi):
                        return [(h["shard"], h["validAfter"]) for h in ch["history"]]
                raise AssertionError("no chunk for %r" % key)
            created = history(5)
            assert [h[0] for h in created] == ["shard01"]
            # the default window (300 s) keeps everything
            c.admin.command("moveChunk", "h.c", find={"_id": 5}, to="shard02")
            s.control("clock", advance=2)
            c.admin.command("moveChunk", "h.c", find={"_id": 5}, to="shard01")
            h = history(5)
            assert [x[0] for x in h] == ["shard01", "shard02", "shard01"]
            assert h[2] == created[0] and h[0][1] > h[1][1] > h[2][1]
            # a 1 s window: the second move of [10, max) drops the creation entry, not the
            # donor's, although both are older than the window
            assert s.control("history_window", s=1)["history_window_s"] == 1
            c.admin.command("moveChunk", "h.c", find={"_id": 15}, to="shard02")
            s.control("clock", advance=3)
            c.admin.command("moveChunk", "h.c", find={"_id": 15}, to="shard01")
            h = history(15)
            assert [x[0] for x in h] == ["shard01", "shard02"], h
            s.control("clock", advance=3)
            c.admin.command("moveChunk", "h.c", find={"_id": 5}, to="shard02")
            assert [x[0] for x in history(5)] == ["shard02", "shard01"]
            # merge: two chunks of one shard become one, with one history entry
            c.admin.command("moveChunk", "h.c", find={"_id": 15}, to="shard02")
            before = max(x[1] for x in history(5) + history(15))
            c.admin.command("mergeChunks", "h.c", bounds=[{"_id": MinKey()}, {"_id": MaxKey()}])
            chunks = list(cfg.config.chunks.find())
            assert len(chunks) == 1 and chunks[0]["shard"] == "shard02"
            assert len(chunks[0]["history"]) == 1
            assert chunks[0]["history"][0]["shard"] == "shard02"
            assert chunks[0]["history"][0]["validAfter"] > before
            assert sorted(d["_id"] for d in c.h.c.find()) == list(range(20))
            with pytest.raises(pymongo.errors.OperationFailure):
                c.admin.command("mergeChunks", "h.c", bounds=[{"_id": MinKey()}, {"_id": 7}])
        finally:
            cfg.close()


def test_mongos_stream_waits_for_every_shard_and_starts_at_cluster_time():
    """mongo-sim-spec §6.4 (server docs/change_streams.md): mongos returns an event only
    once every shard's high-water mark has passed it, so with no periodic no-op an idle
    shard holds back the other shard's events until it writes; and a new stream starts
    at the mongos's cluster time + 1 on every shard, so its first postBatchResumeToken
    never predates writes already made on a busier shard (resuming from it returns none
    of them). Shards read directly (mongocdc's per-shard mode) are not held back."""
    with MongoSim(topology="sharded", shards=2, members=1, noop_interval=0) as s:
        c = s.client()
        c.admin.command("shardCollection", "w.c", key={"k": 1})
        c.admin.command("split", "w.c", middle={"k": 100})
        c.admin.command("moveChunk", "w.c", find={"k": 100}, to="shard02")
        c.w.c.insert_one({"_id": 0, "k": 0})  # shard02 idle from here on
        for i in range(1, 4):
            c.w.c.insert_one({"_id": i, "k": i})  # shard01 only
        with c.w.c.watch(max_await_time_ms=200) as st:
            assert st.try_next() is None
            first = st.resume_token
        with c.w.c.watch(resume_after=first, max_await_time_ms=200) as st:
            assert st.try_next() is None, "the start predates writes already made"
            c.w.c.insert_one({"_id": 10, "k": 10})  # shard01
            time.sleep(0.3)
            assert st.try_next() is None, "an idle shard must hold the stream back"
            sh1 = pymongo.MongoClient(s.shard_uris["shard01"], serverSelectionTimeoutMS=5000)
            try:
                with sh1.w.c.watch(resume_after=first, max_await_time_ms=200) as direct:
                    assert direct.try_next()["documentKey"]["k"] == 10, "a shard's own stream is not held back (and starts where mongos did)"
            finally:
                sh1.close()
            c.w.c.insert_one({"_id": 200, "k": 200})  # shard02 passes 10, now shard01 is idle
            assert st.next()["documentKey"]["k"] == 10
            time.sleep(0.3)
            assert st.try_next() is None, "200 waits for shard01 in turn"
            c.w.c.insert_one({"_id": 11, "k": 11})
            assert st.next()["documentKey"]["k"] == 200
