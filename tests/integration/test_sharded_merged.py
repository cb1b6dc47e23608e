"""Sharded clusters in connection mode sharded (debezium-format.md §6.2/§6.3):
one change stream through mongos for the whole cluster, the snapshot through
mongos, the offsets partition of the dialect ({server_id} in 3.x, {server_id,
rs: "cluster"} in 1.9), both mode switches of §4.4, and event.key.mode
document_key (the whole documentKey as the key, snapshot and stream alike) in
both modes, with mongodb.members.auto.discover false for the shard tasks, and a
SIGKILL loop into Kafka with chunks moving.

What a stream through mongos gives that a shard's does not: one sequence for
the whole cluster ordered by cluster time (mongos merges the shards' streams
and holds an event until every shard's high-water mark has passed it), one
resume token for the cluster, reads that never see orphans. Migrations are
invisible in both (shards drop fromMigrate entries), and documentKey carries
the shard key in both (mongo-sim-spec.md §3.8, §6.4).

One simulated cluster serves the whole module; each test captures its own
database (database.include.list) and its own work folder.
"""

import json
import time

import pytest

from conftest import start_sharded_sim, wait_until
from pipeline_support import (expected_key, key_id_text, log_text, sink_records, wait_log,
                              write_config)

PREFIX = "it"
N = 120  # documents per test collection, split at 60: [min, 60) on shard01, [60, max) on shard02


@pytest.fixture(scope="module")
def sim():
    s = start_sharded_sim()
    try:
        yield s
    finally:
        s.stop()


def populate(sim, db, key=None):
    """db.orders sharded (on _id, or key) over both shards, db.plain unsharded."""
    c = sim.client()
    key = key or {"_id": 1}
    c.admin.command("enableSharding", db)
    c.admin.command("shardCollection", "%s.orders" % db, key=key)
    middle = {k: (60 if k == "_id" else "m") for k in key}
    c.admin.command("split", "%s.orders" % db, middle=middle)
    c.admin.command("moveChunk", "%s.orders" % db, find=middle, to="shard02")
    docs = [{"_id": i, "v": 0} for i in range(N)]
    if "region" in key:
        for d in docs:
            d["region"] = "a" if d["_id"] % 2 else "z"
    c[db].orders.insert_many(docs)
    c[db].plain.insert_many([{"_id": "p%d" % i, "v": 0} for i in range(10)])
    return c


def config(workdir, sim, db, mode="sharded", dialect="3.x", **raw):
    conf = {"mongodb.connection.mode": mode, "debezium.compatibility": dialect,
            "database.include.list": db, "mongodb.poll.interval.ms": 500}
    conf.update(raw)
    return write_config(workdir, sim.uri, raw=conf)


def partitions(workdir):
    p = workdir / "offsets.json"
    out = {}
    for k, v in (json.loads(p.read_text()) if p.exists() else {}).items():
        name, part = json.loads(k)
        assert name == PREFIX and part["server_id"] == PREFIX
        out[part.get("rs")] = v
    return out


def ids(recs, ops, topic=None):
    return [json.loads(key_id_text(r)) for r in recs if r.op in ops and (topic is None or r.topic == topic)]


@pytest.mark.parametrize("dialect", ["3.x", "1.9"])
def test_merged_stream_end_to_end(sim, tmp_workdir, start_mongocdc, dialect):
    """Snapshot through mongos (orphans present on a shard are never read),
    one stream for the cluster in cluster-time order, migrations invisible,
    the dialect's single partition, and a SIGTERM restart resuming without
    loss or repeats."""
    db = "mg" + dialect.replace(".", "")
    c = populate(sim, db)
    sim.control("orphans", keep=True)
    try:
        # [60, max) to shard01: shard02 keeps 60 orphans a shard read would return.
        c.admin.command("moveChunk", "%s.orders" % db, find={"_id": 60}, to="shard01")
    finally:
        sim.control("orphans", keep=False)
    cfg = config(tmp_workdir, sim, db, dialect=dialect)
    d = start_mongocdc("-c", cfg)
    wait_log(tmp_workdir, "streaming changes from", daemon=d)
    log = log_text(tmp_workdir)
    assert "one change stream through mongos for the whole cluster" in log
    assert "[cluster]" in log, "the task's log lines name it"
    recs = sink_records(tmp_workdir)
    topic = "%s.%s.orders" % (PREFIX, db)
    assert sorted(ids(recs, ("r",), topic)) == list(range(N)), "snapshot not exactly once"
    assert len(ids(recs, ("r",), "%s.%s.plain" % (PREFIX, db))) == 10
    for r in recs:
        assert r.key == expected_key(json.loads(key_id_text(r)))
    marks = [r.snapshot for r in recs if r.op == "r"]
    assert marks[-1] == "last" and marks.count("last") == 1, \
        "one snapshot of the deployment, one last record (2.6+/3.x)"
    assert sim.control("clean_orphans")["deleted"] >= 60
    c.admin.command("moveChunk", "%s.orders" % db, find={"_id": 60}, to="shard02")

    # Writes alternating between the shards, a migration in the middle.
    order = []
    for i in range(0, N, 7):
        c[db].orders.update_one({"_id": i}, {"$set": {"v": 1}})
        order.append(i)
    c.admin.command("moveChunk", "%s.orders" % db, find={"_id": 0}, to="shard02")
    for i in range(3, N, 7):
        c[db].orders.update_one({"_id": i}, {"$set": {"v": 2}})
        order.append(i)

    def streamed():
        return [r for r in sink_records(tmp_workdir) if r.op in ("c", "u", "d")]
    wait_until(lambda: len(streamed()) >= len(order), 60, "%d streamed events" % len(order))
    time.sleep(1.0)
    got = streamed()
    assert len(got) == len(order), "the chunk migration produced events (fromMigrate)"
    assert ids(got, ("u",)) == order, "one stream for the cluster: the writes' own order"
    src = [(r.payload["source"]["ts_ms"] // 1000, r.payload["source"]["ord"]) for r in got]
    assert src == sorted(src), "events in cluster-time order across shards"
    if dialect == "1.9":
        assert all(r.payload["source"]["rs"] == "cluster" for r in got)

    assert d.stop() == 0
    parts = partitions(tmp_workdir)
    want = "cluster" if dialect == "1.9" else None
    assert list(parts) == [want], "one partition for the cluster: %r" % parts
    assert "resume_token" in parts[want]

    c[db].orders.insert_one({"_id": 5000, "v": 0})  # while stopped
    d2 = start_mongocdc("-c", cfg)
    wait_until(lambda: 5000 in ids(sink_records(tmp_workdir), ("c",)), 60,
               "the insert made while stopped")
    c[db].orders.delete_one({"_id": 1})
    wait_until(lambda: 1 in ids(sink_records(tmp_workdir), ("d",)), 60, "the delete")
    assert d2.stop() == 0
    recs = sink_records(tmp_workdir)
    assert len(ids(recs, ("r",))) == N + 10, "no snapshot after the restart"
    assert ids(recs, ("u",)) == order, "nothing repeated after the restart"
    assert ids(recs, ("c",)) == [5000]


def test_switch_per_shard_to_merged_starts_at_the_oldest_shard(sim, tmp_workdir, start_mongocdc):
    """§4.4: per-shard offsets, then mongodb.connection.mode sharded: the merged
    stream starts at the oldest shard position (WARN with the count of
    shards), so writes made between the two runs all arrive; what the newer
    shard had already delivered may come again."""
    db = "sw1"
    c = populate(sim, db)
    cfg = config(tmp_workdir, sim, db, mode="replica_set")
    d = start_mongocdc("-c", cfg)
    wait_log(tmp_workdir, "streaming changes from", daemon=d, n=2)
    c[db].orders.update_one({"_id": 1}, {"$set": {"v": 1}})    # shard01
    c[db].orders.update_one({"_id": 61}, {"$set": {"v": 1}})   # shard02
    wait_until(lambda: len(ids(sink_records(tmp_workdir), ("u",))) >= 2, 60, "2 updates")
    time.sleep(1.0)  # offsets flushed
    assert d.stop() == 0
    assert sorted(partitions(tmp_workdir)) == ["shard01", "shard02"]

    while_stopped = [2, 62, 3, 63]
    for i in while_stopped:
        c[db].orders.update_one({"_id": i}, {"$set": {"v": 2}})
    cfg = config(tmp_workdir, sim, db, mode="sharded")
    d = start_mongocdc("-c", cfg)
    wait_log(tmp_workdir, "streaming changes from", daemon=d)
    log = log_text(tmp_workdir)
    warn = [l for l in log.splitlines() if "switching from per-shard offsets of 2 shards" in l]
    assert len(warn) == 1 and " WARN " in warn[0], warn
    c[db].orders.update_one({"_id": 4}, {"$set": {"v": 3}})
    wait_until(lambda: 4 in ids(sink_records(tmp_workdir), ("u",)), 60,
               "the update after the switch")
    assert d.stop() == 0
    upd = ids(sink_records(tmp_workdir), ("u",))
    for i in while_stopped:
        assert i in upd, "update of %d made between the runs was lost" % i
    assert len(ids(sink_records(tmp_workdir), ("r",))) == N + 10, "no second snapshot"
    parts = partitions(tmp_workdir)
    assert None in parts, "the merged partition {server_id} is stored"


def test_switch_merged_to_per_shard_refused_unless_allowed(sim, tmp_workdir, start_mongocdc, run_mongocdc):
    """§4.4: offsets of the merged stream and per-shard mode configured: exit 1
    naming internal.mongodb.allow.offset.invalidation; with it true the merged
    offsets are ignored and every shard follows snapshot.mode."""
    db = "sw2"
    populate(sim, db)
    cfg = config(tmp_workdir, sim, db, mode="sharded")
    d = start_mongocdc("-c", cfg)
    wait_log(tmp_workdir, "streaming changes from", daemon=d)
    time.sleep(1.0)
    assert d.stop() == 0
    assert list(partitions(tmp_workdir)) == [None]

    cfg = config(tmp_workdir, sim, db, mode="replica_set")
    r = run_mongocdc("-c", cfg, timeout_s=60)
    err = r.stderr.decode()
    assert r.returncode == 1, err[-2000:]
    assert "internal.mongodb.allow.offset.invalidation" in err

    cfg = config(tmp_workdir, sim, db, mode="replica_set",
                 **{"internal.mongodb.allow.offset.invalidation": True})
    before = len(ids(sink_records(tmp_workdir), ("r",)))
    d = start_mongocdc("-c", cfg)
    wait_log(tmp_workdir, "streaming changes from", daemon=d, n=2)
    assert "are ignored" in log_text(tmp_workdir)
    assert d.stop() == 0
    assert len(ids(sink_records(tmp_workdir), ("r",))) - before == N + 10, "shards snapshot afresh"
    assert {"shard01", "shard02"} <= set(partitions(tmp_workdir))

    # The shards' offsets are now newer than the merged stream's: per-shard
    # capture continues from them without the option ...
    cfg = config(tmp_workdir, sim, db, mode="replica_set")
    d = start_mongocdc("-c", cfg)
    wait_log(tmp_workdir, "streaming changes from", daemon=d, n=2)
    assert "are ignored" not in log_text(tmp_workdir)
    assert d.stop() == 0
    # ... and a switch to the merged stream again starts from the shards'
    # positions, not from the stale merged offsets.
    cfg = config(tmp_workdir, sim, db, mode="sharded")
    d = start_mongocdc("-c", cfg)
    wait_log(tmp_workdir, "streaming changes from", daemon=d)
    log = log_text(tmp_workdir)
    assert "newer than the merged stream's" in log and "switching from per-shard offsets" in log
    assert d.stop() == 0


def test_switch_back_after_a_switch_is_refused(sim, tmp_workdir, start_mongocdc, run_mongocdc):
    """per-shard -> merged -> per-shard: the shards still have their offsets
    from before the first switch, older than the merged stream's; going back
    to them would replay everything since, so it is refused unless allowed."""
    db = "sw3"
    c = populate(sim, db)
    d = start_mongocdc("-c", config(tmp_workdir, sim, db, mode="replica_set"))
    wait_log(tmp_workdir, "streaming changes from", daemon=d, n=2)
    assert d.stop() == 0
    d = start_mongocdc("-c", config(tmp_workdir, sim, db, mode="sharded"))
    wait_log(tmp_workdir, "streaming changes from", daemon=d)
    c[db].orders.update_one({"_id": 3}, {"$set": {"v": 5}})
    wait_until(lambda: any(r.op == "u" for r in sink_records(tmp_workdir)), 60, "an update")
    assert d.stop() == 0
    r = run_mongocdc("-c", config(tmp_workdir, sim, db, mode="replica_set"), timeout_s=60)
    err = r.stderr.decode()
    assert r.returncode == 1, err[-2000:]
    assert "internal.mongodb.allow.offset.invalidation" in err and "older" in err


@pytest.mark.parametrize("mode", ["sharded", "replica_set"])
def test_key_by_whole_document_key(sim, tmp_workdir, start_mongocdc, mode):
    """event.key.mode document_key: the key's id is the whole documentKey
    (shard key fields, then _id) for snapshot and stream alike, in both
    connection modes; unsharded collections get {"_id": ...}. The per-shard
    run also uses mongodb.members.auto.discover false (each shard's one
    address with directConnection)."""
    db = "dk" + mode[0]
    c = populate(sim, db, key={"region": 1, "_id": 1})
    raw = {"event.key.mode": "document_key"}
    if mode == "replica_set":
        raw["mongodb.members.auto.discover"] = False
    cfg = config(tmp_workdir, sim, db, mode=mode, **raw)
    d = start_mongocdc("-c", cfg)
    wait_log(tmp_workdir, "streaming changes from", daemon=d, n=1 if mode == "sharded" else 2)
    c[db].orders.update_one({"_id": 7, "region": "a"}, {"$set": {"v": 1}})
    c[db].orders.update_one({"_id": 8, "region": "z"}, {"$set": {"v": 1}})
    c[db].plain.update_one({"_id": "p1"}, {"$set": {"v": 1}})
    wait_until(lambda: len(sink_records(tmp_workdir, ("u",))) >= 3, 60, "3 updates")
    assert d.stop() == 0
    recs = sink_records(tmp_workdir)
    topic = "%s.%s.orders" % (PREFIX, db)

    def want(i):
        region = "a" if i % 2 else "z"
        return '{"id":%s}' % json.dumps('{"region": "%s","_id": %d}' % (region, i), separators=(",", ":"))
    snap = [r for r in recs if r.op == "r" and r.topic == topic]
    assert len(snap) == N
    for r in snap:
        i = json.loads(key_id_text(r))["_id"]
        assert r.key == want(i), r.key
    upd = {json.loads(key_id_text(r))["_id"]: r.key for r in recs if r.op == "u" and r.topic == topic}
    assert upd == {7: want(7), 8: want(8)}, "stream keys equal the snapshot keys"
    plain = [r for r in recs if r.topic.endswith(".plain")]
    assert all(json.loads(key_id_text(r)) == {"_id": json.loads(key_id_text(r))["_id"]} for r in plain)
    assert plain[0].key.startswith('{"id":"{\\"_id\\": \\"p')


def test_merged_stream_survives_mongos_outage_and_shard_election(sim, tmp_workdir, start_mongocdc):
    """The mongos unreachable for a while, then a shard's primary stepping
    down: the task reconnects with backoff (as for a replica set) and resumes
    from its token; every write arrives once."""
    db = "fo"
    c = populate(sim, db)
    cfg = config(tmp_workdir, sim, db)
    d = start_mongocdc("-c", cfg)
    wait_log(tmp_workdir, "streaming changes from", daemon=d)
    c[db].orders.update_one({"_id": 1}, {"$set": {"v": 1}})
    wait_until(lambda: ids(sink_records(tmp_workdir), ("u",)) == [1], 60, "first update")
    sim.control("unreachable", shard="mongos", member=0)
    time.sleep(2.5)
    sim.control("reachable", shard="mongos", member=0)
    c = sim.client()
    c[db].orders.update_one({"_id": 61}, {"$set": {"v": 1}})
    wait_until(lambda: 61 in ids(sink_records(tmp_workdir), ("u",)), 60, "update after the outage")
    sim.control("stepdown", shard="shard02", elect=None)
    time.sleep(0.5)
    sim.control("elect", shard="shard02", member=0)
    c[db].orders.update_one({"_id": 62}, {"$set": {"v": 1}})
    c[db].orders.update_one({"_id": 2}, {"$set": {"v": 1}})
    wait_until(lambda: len(ids(sink_records(tmp_workdir), ("u",))) >= 4, 60,
               "updates after the election")
    time.sleep(1.0)
    assert d.running()
    assert d.stop() == 0
    assert ids(sink_records(tmp_workdir), ("u",)) == [1, 61, 62, 2]
    log = log_text(tmp_workdir)
    assert "reconnect" in log.lower() or "retry" in log.lower(), log[-2000:]


def test_config_server_seed_refused_in_merged_mode(sim, tmp_workdir, run_mongocdc):
    """Merged mode streams through mongos: the config server replica set is
    refused with what to give instead."""
    cfg = write_config(tmp_workdir, sim.config_uri, raw={"mongodb.connection.mode": "sharded",
                                                         "debezium.compatibility": "3.x"})
    r = run_mongocdc("-c", cfg, timeout_s=60)
    assert r.returncode == 1
    assert "give a mongos connection string" in r.stderr.decode()


def test_check_in_merged_mode_checks_mongos_only(sim, tmp_workdir, run_mongocdc):
    """`mongocdc check` with mongodb.connection.mode sharded checks what the
    daemon will use: mongos (collections, change stream, find) and the merged
    partition; no shard is connected to and no oplog is read."""
    db = "ck"
    populate(sim, db)
    r = run_mongocdc("check", "-c", config(tmp_workdir, sim, db), timeout_s=60)
    out = r.stdout.decode()
    assert r.returncode == 0, out + r.stderr.decode()
    assert "one change stream through mongos" in out
    assert "change stream opened" in out
    assert "find allowed on all 2 captured collections" in out
    assert "no stored position for the merged stream" in out
    assert "shard01" not in out and "oplog.rs" not in out, out


def test_incremental_snapshot_through_mongos(sim, tmp_workdir, start_mongocdc):
    """An execute-snapshot signal in merged mode: the signal collection and
    its window markers go through mongos, so the markers come back on the
    one stream; orphans left on a shard are never read; writes during the
    snapshot supersede the rows of their keys; every document once."""
    db = "mginc"
    c = populate(sim, db)
    sim.control("orphans", keep=True)
    try:
        c.admin.command("moveChunk", "%s.orders" % db, find={"_id": 60}, to="shard01")
    finally:
        sim.control("orphans", keep=False)
    cfg = config(tmp_workdir, sim, db, **{"snapshot.mode": "no_data",
                                          "signal.data.collection": "%s.signals" % db,
                                          "incremental.snapshot.chunk.size": 16})
    d = start_mongocdc("-c", cfg)
    wait_log(tmp_workdir, "streaming changes from", daemon=d)
    c[db].signals.insert_one({"_id": "inc-1", "type": "execute-snapshot",
                              "data": {"data-collections": ["%s.orders" % db]}})
    for i in range(0, N, 5):
        c[db].orders.update_one({"_id": i}, {"$set": {"v": 9}})
    wait_until(lambda: "incremental snapshot (signal inc-1) completed" in log_text(tmp_workdir),
               90, "the incremental snapshot")
    topic = "%s.%s.orders" % (PREFIX, db)
    recs = sink_records(tmp_workdir)
    rows = ids(recs, ("r",), topic)
    assert len(rows) == len(set(rows)), "a row read twice (orphans?)"
    streamed = set(ids(recs, ("u",), topic))
    assert set(rows) | streamed == set(range(N)), "a document neither read nor streamed"
    assert "marker windows" in log_text(tmp_workdir)
    assert d.stop() == 0


@pytest.mark.parametrize("store", ["file", "kafka"])
def test_sigkill_loop_with_kafka_and_chunk_moves_loses_nothing(sim, tmp_workdir, kafka,
                                                               start_mongocdc, store):
    """Merged mode into Kafka, offsets in the file store or in a Kafka topic
    (Kafka Connect's offsets format), killed with SIGKILL
    again and again: first inside the initial snapshot, then while documents
    are written through mongos and chunks move between the shards. Every
    change is in Kafka at least once (offsets only move over acknowledged
    records), every document is in a snapshot; duplicates (the replays of
    at-least-once delivery after each kill) are counted and reported."""
    import random
    import threading
    from pipeline_support import read_topics
    import kafka_support
    db = "mgkill" + store
    prefix = "mk%d" % int(time.time() * 1000)
    stored = {"offsets.storage": store}
    if store == "kafka":
        stored["offsets.topic"] = kafka_support.unique_topic("mcdc-kill-offsets")
    populate(sim, db)
    rnd = random.Random(11)
    written = []
    stop = threading.Event()

    def writer():
        w = sim.client()
        n = 0
        while not stop.is_set():
            n += 1
            w[db].orders.update_one({"_id": rnd.randrange(N)}, {"$set": {"v": n}})
            written.append(n)
            if n % 40 == 0:
                try:
                    w.admin.command("moveChunk", "%s.orders" % db, find={"_id": rnd.randrange(N)},
                                    to="shard01" if n % 80 == 0 else "shard02")
                except Exception:
                    pass  # the chunk is already there
            time.sleep(0.01)
        w.close()

    t = threading.Thread(target=writer, daemon=True)
    kills = 0
    for k in range(4):
        cfg = write_config(tmp_workdir, sim.uri, name="run%d.yaml" % k,
                           kafka={"bootstrap.servers": kafka.bootstrap},
                           raw=dict(stored, **{"mongodb.connection.mode": "sharded",
                                               "database.include.list": db,
                                               "topic.prefix": prefix,
                                               "offsets.flush.interval.ms": 300,
                                               "snapshot.fetch.size": 10}))
        if k == 0:
            # A snapshot through mongos slow enough to be killed inside.
            sim.control("delay", shard="mongos", command="getMore", ms=100)
        d = start_mongocdc("-c", cfg)
        if k == 0:
            try:
                wait_log(tmp_workdir, "initial snapshot starting", daemon=d)
                time.sleep(0.8)
                assert "streaming changes from" not in log_text(tmp_workdir), \
                    "the snapshot ended before the kill"
            finally:  # the module's other tests share the cluster
                sim.control("delay", shard="mongos", command="getMore", ms=0)
        else:
            if k == 1:
                # Changes before a snapshot's start are in the snapshot, not in
                # the stream: write once the redone snapshot is complete.
                wait_log(tmp_workdir, "streaming changes from", daemon=d)
                t.start()
            time.sleep(1.5)
        d.proc.kill()
        d.proc.wait(timeout=10)
        kills += 1
    stop.set()
    t.join(timeout=30)
    assert written, "the writer wrote nothing"
    cfg = write_config(tmp_workdir, sim.uri, name="final.yaml",
                       kafka={"bootstrap.servers": kafka.bootstrap},
                       raw=dict(stored, **{"mongodb.connection.mode": "sharded",
                                           "database.include.list": db, "topic.prefix": prefix}))
    d = start_mongocdc("-c", cfg)
    want = set(written)
    topic = "%s.%s.orders" % (prefix, db)

    def read():
        return [r for r in read_topics(kafka.bootstrap, [topic], idle_s=1.0, timeout_s=30)
                if r.value is not None]

    def seen(recs):
        return [r.updated_fields()["v"] for r in recs if r.op == "u"]
    try:
        recs = wait_until(lambda: (lambda rs: rs if set(seen(rs)) >= want else None)(read()),
                          60, "every change in Kafka after the kills")
    except TimeoutError:
        missing = sorted(want - set(seen(read())))
        raise AssertionError("%d of %d changes lost, e.g. %r" % (len(missing), len(want),
                                                                missing[:10]))
    vals = seen(recs)
    snapped = set(json.loads(key_id_text(r)) for r in recs if r.op == "r")
    assert set(range(N)) <= snapped, "a document is in no snapshot"
    dups = len(vals) - len(set(vals))
    print("merged mode, Kafka, %s offsets, %d SIGKILLs with chunk moves: %d changes, 0 lost, "
          "%d duplicates (%d snapshot reads for %d documents)"
          % (store, kills, len(want), dups, sum(1 for r in recs if r.op == "r"), N))
    assert d.stop(timeout_s=30) == 0
