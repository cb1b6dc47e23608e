"""The per-document order gate when the config server has trimmed a chunk's
history (design.md §2; topology/gate.h): a migration commit drops the history
entries older than minSnapshotHistoryWindowInSeconds (the donor's kept), so
after a second move of the chunk the first donor is gone from config.chunks.
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

from conftest import wait_until
from pipeline_support import key_id_text, log_text, write_config
from test_sharded import populate, start_cluster, wait_log_count


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
    sim = start_cluster(shards=3)
    try:
        c = populate(sim)
        sim.control("history_window", s=1)
        cfg = write_config(tmp_workdir, sim.uri, kafka={"bootstrap.servers": kafka.bootstrap},
                           **{"topic.prefix": prefix, "offsets.flush.interval.ms": 500,
                              "capture.mode": "change_streams"})
        d = start_mongocdc("-c", cfg)
        wait_log_count(tmp_workdir, "streaming changes from", 3, 120, d)
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
