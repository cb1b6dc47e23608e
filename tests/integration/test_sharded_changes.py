"""Shards coming and going while mongocdc runs (issue #8, connection mode
replica_set, debezium-format.md §6.1): a removed shard's lagging task
delivers its tail before it stops, a shard name removed and added again gets
a new task without a restart, and an unreachable mongos (discovery) leaves
the running tasks alone, with SIGTERM still writing every task's offsets.

Runs on the simulator's sharded topology (tests/mongosim, mongo-sim-spec.md §6);
the file sink stands in for Kafka.
"""

import json

from conftest import start_sharded_sim, wait_until
from pipeline_support import key_id_text, log_text, sink_records, wait_log, write_config
from test_sharded import ids_of, populate, shard_partitions

ON_SHARD02 = list(range(100, 200, 10))  # shop.orders [100, max) is on shard02 (populate)


def changes_of(workdir, rs):
    return [r for r in sink_records(workdir / "events.jsonl")
            if r.op in ("c", "u", "d") and r.payload["source"]["rs"] == rs]


def empty_shard02(c):
    """Moves shard02's chunk to shard01 and removes shard02 (draining, then completed)."""
    c.admin.command("moveChunk", "shop.orders", find={"_id": 150}, to="shard01")
    assert c.admin.command("removeShard", "shard02")["state"] == "started"
    assert c.admin.command("removeShard", "shard02")["state"] == "completed"


def test_removed_shard_that_lags_delivers_its_tail(tmp_workdir, start_mongocdc):
    """shard02's task is slowed (every getMore on shard02 delayed) when the
    shard is removed: every change written to it before the removal is
    delivered, then its task stops with its final offsets."""
    sim = start_sharded_sim()
    try:
        c = populate(sim)
        cfg = write_config(tmp_workdir, sim.uri, **{"mongodb.poll.interval.ms": 300,
                                                    "capture.mode": "change_streams"})
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "streaming changes from", 120, d, n=2)
        sim.control("delay", shard="shard02", command="getMore", ms=1500)
        for v in (1, 2, 3):
            for i in ON_SHARD02:
                c.shop.orders.update_one({"_id": i}, {"$set": {"v": v}})
        empty_shard02(c)
        wait_log(tmp_workdir, "shard shard02 removed from the cluster", 30, d)
        wait_log(tmp_workdir, "shard shard02 drained up to", 120, d)
        wait_log(tmp_workdir, "capture of shard02 stopped cleanly", 30, d)
        got = [r for r in changes_of(tmp_workdir, "shard02") if r.op == "u"]
        for i in ON_SHARD02:
            vs = [r.updated_fields()["v"] for r in got if json.loads(key_id_text(r)) == i]
            assert vs == [1, 2, 3], "document %d: updates on shard02 before removal %r" % (i, vs)
        assert "removed shard shard02 has delivered its tail" in log_text(tmp_workdir)
        assert d.running(), "the other tasks must go on"
        c.shop.orders.update_one({"_id": 0}, {"$set": {"v": 9}})
        wait_until(lambda: [r for r in changes_of(tmp_workdir, "shard01")
                            if r.op == "u" and json.loads(key_id_text(r)) == 0], 30,
                   "shard01 still streams")
        assert d.stop(timeout_s=30) == 0
        assert sorted(shard_partitions(tmp_workdir)) == ["shard01", "shard02"]
        c.close()
    finally:
        sim.stop()


def test_shard_removed_and_added_again_gets_a_new_task(tmp_workdir, start_mongocdc):
    """shard02 is removed, written to directly while it is no shard (not a
    cluster change: not delivered), added again under its name: a new task
    streams from its new topologyTime, without a restart."""
    sim = start_sharded_sim()
    try:
        c = populate(sim)
        cfg = write_config(tmp_workdir, sim.uri, **{"mongodb.poll.interval.ms": 300})
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "streaming changes from", 120, d, n=2)
        empty_shard02(c)
        wait_log(tmp_workdir, "the capture task of removed shard shard02", 60, d)
        sim.control("write", shard="shard02", op="insert", ns="shop.orders",
                    doc={"_id": 5000, "v": "not a cluster change"})
        assert sim.control("add_shard", name="shard02")["shardAdded"] == "shard02"
        wait_log(tmp_workdir, "shard shard02 added to the cluster", 30, d)
        wait_log(tmp_workdir, "[shard02] streaming changes from", 30, d, n=2)
        c.admin.command("moveChunk", "shop.orders", find={"_id": 150}, to="shard02")
        for i in ON_SHARD02:
            c.shop.orders.update_one({"_id": i}, {"$set": {"v": 4}})
        wait_until(lambda: len([r for r in changes_of(tmp_workdir, "shard02")
                                if r.op == "u"]) >= len(ON_SHARD02), 60,
                   "updates on the re-added shard")
        got = changes_of(tmp_workdir, "shard02")
        assert sorted(ids_of([r for r in got if r.op == "u"], ("u",))) == ON_SHARD02
        assert 5000 not in ids_of(got, ("c",)), "a write while it was no shard was delivered"
        assert d.running()
        assert d.stop(timeout_s=30) == 0
        assert sorted(shard_partitions(tmp_workdir)) == ["shard01", "shard02"]
        c.close()
    finally:
        sim.stop()


def test_discovery_unreachable_tasks_go_on_and_sigterm_writes_offsets(tmp_workdir,
                                                                       start_mongocdc):
    """The mongos (the seed, the only way to config.shards here) goes
    away: the shards' tasks go on streaming, a WARN says how long
    discovery has failed, and SIGTERM exits 0 with every task's final offsets
    written although a config.shards read may be in flight."""
    sim = start_sharded_sim()
    try:
        c = populate(sim)
        cfg = write_config(tmp_workdir, sim.uri, **{"mongodb.poll.interval.ms": 300})
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "streaming changes from", 120, d, n=2)
        sim.control("unreachable", shard="mongos", member=0)
        wait_log(tmp_workdir, "shard discovery has failed for", 60, d)
        direct = {rs: sim.control("write", shard=rs, op="update", ns="shop.orders",
                                  q={"_id": i}, u={"$set": {"v": 8}})
                  for rs, i in (("shard01", 0), ("shard02", 100))}
        assert all(r["modified"] == 1 for r in direct.values())
        wait_until(lambda: all([r for r in changes_of(tmp_workdir, rs) if r.op == "u"]
                               for rs in ("shard01", "shard02")), 60,
                   "both shards stream while discovery fails")
        assert d.stop(timeout_s=60) == 0
        after = shard_partitions(tmp_workdir)
        assert sorted(after) == ["shard01", "shard02"]
        assert "capture of shard01 stopped cleanly" in log_text(tmp_workdir)
        assert "capture of shard02 stopped cleanly" in log_text(tmp_workdir)
        c.close()
    finally:
        sim.stop()
