"""The per-document order gate across chunk migrations (design.md §2;
topology/gate.h): a donor's events of a moved chunk reach each document's
topic partition before the recipient's, with range and hashed shard keys
alike, and when the config server has trimmed a chunk's history: a migration
commit drops the history entries older than minSnapshotHistoryWindowInSeconds
(the donor's kept), so after a second move of the chunk the first donor is
gone from config.chunks.
A recipient's event from between the two moves then has no known donor and
must wait until every other shard's task has acknowledged up to its arrival,
or a lagging first donor's older events of the same document reach the
topic partition after it.

Runs on the simulator's sharded topology (tests/mongosim, its history_window
control) against a Kafka broker.
"""

import json
import time

import pymongo
import pytest

import test_sharded
import test_sharded_hashed
from conftest import start_sharded_sim, wait_until
from pipeline_support import key_id_text, log_text, sink_records, wait_log, write_config


def _range_chunk(sim):
    """shop.orders sharded on _id (test_sharded.populate); the chunk [MinKey, 100)
    of shard01. Returns (client, db, coll, ids in the chunk, an _id to find it by)."""
    return test_sharded.populate(sim), "shop", "orders", list(range(0, 100, 10)), 10


def _hashed_chunk(sim):
    """hash.h sharded on {_id: "hashed"} (test_sharded_hashed.populate); the chunk
    [MinKey, 0) of hash64(_id), on shard01. Same return as _range_chunk."""
    c, _, _ = test_sharded_hashed.populate(sim)
    moved = [i for i in range(test_sharded_hashed.N) if test_sharded_hashed.hash64(i) < 0][:10]
    return c, "hash", "h", moved, moved[0]


@pytest.mark.parametrize("chunk,prefix", [(_range_chunk, "shgate"), (_hashed_chunk, "shhash")],
                         ids=["range", "hashed"])
def test_order_per_document_across_a_migration_with_a_lagging_donor(tmp_workdir, kafka,
                                                                    start_mongocdc, chunk, prefix):
    """A chunk (of a range or a hashed shard key) moves from shard01 to shard02
    while its documents are being written, and shard01's task is slowed (every
    getMore on shard01 delayed): each document's events reach its Kafka
    partition in cluster-time order, the ones written on shard01 before the
    move first, although shard02's fast task reads the later ones long before."""
    from pipeline_support import read_topics
    prefix = "%s%d" % (prefix, int(time.time() * 1000))
    sim = start_sharded_sim()
    try:
        c, db, coll, moved, find_id = chunk(sim)
        cfg = write_config(tmp_workdir, sim.uri, kafka={"bootstrap.servers": kafka.bootstrap},
                           **{"topic.prefix": prefix, "offsets.flush.interval.ms": 500,
                              "capture.mode": "change_streams"})
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "streaming changes from", 120, d, n=2)
        sim.control("delay", shard="shard01", command="getMore", ms=1500)
        for v in range(1, 4):
            for i in moved:
                c[db][coll].update_one({"_id": i}, {"$set": {"v": v}})
        c.admin.command("moveChunk", "%s.%s" % (db, coll), find={"_id": find_id}, to="shard02")
        for v in range(4, 7):
            for i in moved:
                c[db][coll].update_one({"_id": i}, {"$set": {"v": v}})
        topic = "%s.%s.%s" % (prefix, db, coll)

        def updates():
            recs = read_topics(kafka.bootstrap, [topic], idle_s=1.0, timeout_s=30)
            return [r for r in recs if r.value is not None and r.op == "u"]
        got = wait_until(lambda: (lambda u: u if len(u) >= 6 * len(moved) else None)(updates()),
                         120, "every update in Kafka")
        sim.control("delay", shard="shard01", command="getMore", ms=0)
        for i in moved:
            seq = [r.updated_fields()["v"] for r in got if json.loads(key_id_text(r)) == i]
            assert seq == sorted(seq), "document %d out of order: %r" % (i, seq)
            assert sorted(set(seq)) == list(range(1, 7)), "document %d: %r" % (i, seq)
            shards = [r.payload["source"]["rs"] for r in got if json.loads(key_id_text(r)) == i]
            assert shards[:3] == ["shard01"] * 3 and shards[-3:] == ["shard02"] * 3
        assert "waits until the events of shard0" in log_text(tmp_workdir), \
            "the gate never held an event: the test did not exercise it"
        assert d.stop(timeout_s=30) == 0
        c.close()
    finally:
        sim.stop()


def test_order_per_document_when_the_donor_is_trimmed_from_chunk_history(tmp_workdir, kafka,
                                                                         start_mongocdc):
    """[MinKey, 100) moves shard01 -> shard02 -> shard03 with a 1 s history
    window, so the second commit drops shard01's entry: shard02's events of
    the chunk (written between the moves) have no named donor. shard01's
    stream (the lagging donor) and shard02's stall until both moves are
    committed; shard02's is released first and reads its events with the
    trimmed history in config.chunks, shard01's only once shard02 has either
    published them or held one (the gate's log). Every document's updates
    reach its Kafka partition in cluster-time order: shard01's, shard02's,
    shard03's."""
    from pipeline_support import read_topics
    prefix = "shtrim%d" % int(time.time() * 1000)
    sim = start_sharded_sim(shards=3)
    try:
        c = test_sharded.populate(sim)
        sim.control("history_window", s=1)
        cfg = write_config(tmp_workdir, sim.uri, kafka={"bootstrap.servers": kafka.bootstrap},
                           **{"topic.prefix": prefix, "offsets.flush.interval.ms": 500,
                              "capture.mode": "change_streams"})
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "streaming changes from", 120, d, n=3)
        sim.control("no_majority", shard="shard01", on=True)
        sim.control("no_majority", shard="shard02", on=True)
        moved = list(range(0, 100, 10))   # in the chunk [MinKey, 100) of shard01

        def write(vs):
            for v in vs:
                for i in moved:
                    c.shop.orders.update_one({"_id": i}, {"$set": {"v": v}})
        write(range(1, 4))
        c.admin.command("moveChunk", "shop.orders", find={"_id": 10}, to="shard02")
        write(range(4, 7))
        sim.control("clock", advance=3)   # past the history window
        c.admin.command("moveChunk", "shop.orders", find={"_id": 10}, to="shard03")
        write(range(7, 10))
        cfgsvr = pymongo.MongoClient(sim.config_uri, serverSelectionTimeoutMS=5000)
        chunk = cfgsvr.config.chunks.find_one({"max": {"_id": 100}})
        cfgsvr.close()
        assert [h["shard"] for h in chunk["history"]] == ["shard03", "shard02"], \
            "the second move did not trim the history: %r" % chunk["history"]
        topic = "%s.shop.orders" % prefix

        def updates():
            recs = read_topics(kafka.bootstrap, [topic], idle_s=1.0, timeout_s=30)
            return [r for r in recs if r.value is not None and r.op == "u"]

        sim.control("no_majority", shard="shard02", on=False)
        # shard02's events either went out ungated (the order is then lost) or one is held
        wait_until(lambda: "waits until the events of every other shard" in log_text(tmp_workdir)
                   or any(r.payload["source"]["rs"] == "shard02" for r in updates()),
                   120, "shard02 to publish or hold its events")
        sim.control("no_majority", shard="shard01", on=False)
        got = wait_until(lambda: (lambda u: u if len(u) >= 9 * len(moved) else None)(updates()),
                         180, "every update in Kafka")
        for i in moved:
            mine = [r for r in got if json.loads(key_id_text(r)) == i]
            seq = [r.updated_fields()["v"] for r in mine]
            assert seq == sorted(seq), "document %d out of order: %r" % (i, seq)
            assert sorted(set(seq)) == list(range(1, 10)), "document %d: %r" % (i, seq)
            shards = [r.payload["source"]["rs"] for r in mine]
            assert shards[:3] == ["shard01"] * 3 and shards[3:6] == ["shard02"] * 3 \
                and shards[-3:] == ["shard03"] * 3, shards
        assert d.stop(timeout_s=30) == 0
        c.close()
    finally:
        sim.stop()


def test_a_shard_unreachable_from_the_start_holds_no_other_shard(tmp_workdir, start_mongocdc):
    """A first start (no offsets) with shard02 down: shard01 snapshots and
    streams, and its events of chunks that never moved (whose one history
    entry leaves no donor, so the gate waits for every other shard) are not
    held by shard02's task, which has published nothing: it will read from a
    position taken when it reaches its shard, past anything it could owe.
    When shard02 is back it snapshots and streams too, nothing lost."""
    ids_of = test_sharded.ids_of
    sim = start_sharded_sim()
    try:
        c = test_sharded.populate(sim)
        sim.control("unreachable", shard="shard02", member=0)
        cfg = write_config(tmp_workdir, sim.uri, **{"connect.max.attempts": 100})
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "[shard01] streaming changes from", 120, d)
        for i in range(0, 100, 10):   # shard01's documents, a chunk that never moved
            c.shop.orders.update_one({"_id": i}, {"$set": {"v": 5}})

        def updated():
            return ids_of(sink_records(tmp_workdir), ("u",))
        wait_until(lambda: len(updated()) >= 10, 60,
                   "shard01's events while shard02 has been down since the start")
        assert sorted(updated()) == list(range(0, 100, 10))
        sim.control("reachable", shard="shard02", member=0)
        sim.control("elect", shard="shard02", member=0)
        wait_log(tmp_workdir, "[shard02] streaming changes from", 120, d)
        for i in range(100, 200, 10):  # shard02's documents
            c.shop.orders.update_one({"_id": i}, {"$set": {"v": 5}})
        wait_until(lambda: len(updated()) >= 20, 90, "shard02 streams once back")
        assert sorted(updated()) == list(range(0, 200, 10))
        snap = [r for r in sink_records(tmp_workdir) if r.op == "r"]
        assert len({key_id_text(r) for r in snap if r.payload["source"]["rs"] == "shard02"}) == 100
        assert d.stop(timeout_s=30) == 0
        c.close()
    finally:
        sim.stop()
