"""Sharded clusters in connection mode replica_set (debezium-format.md §6.1):
shards discovered from a mongos or from the config server replica set, one
capture task per shard with its own offsets partition {server_id, rs: <shard>},
every shard's events on one topic per collection, migrations invisible, the
snapshot exactly once with orphans present, per-document order across a
migration, shards added and removed while running, one shard unreachable or
electing, and restarts (SIGTERM, SIGKILL) resuming every shard.

Runs on the simulator's sharded topology (tests/mongosim, mongo-sim-spec.md §6);
the file sink stands in for Kafka (each line holds the key and value bytes).
"""

import json
import time

import pytest

from conftest import start_sharded_sim, wait_until
from pipeline_support import (expected_key, key_id_text, log_text, sink_records, wait_log,
                              write_config)

PREFIX = "it"
SHARDED = 200   # documents of shop.orders, sharded on _id, split at 100 with [100, max) on shard02
UNSHARDED = 30  # documents of shop.plain, unsharded (on the database's primary shard)


def populate(sim):
    """shop.orders sharded on _id over shard01 [min, 100) and shard02 [100, max);
    shop.plain unsharded. Returns the pymongo client (through mongos)."""
    c = sim.client()
    c.admin.command("enableSharding", "shop")
    c.admin.command("shardCollection", "shop.orders", key={"_id": 1})
    c.admin.command("split", "shop.orders", middle={"_id": 100})
    c.admin.command("moveChunk", "shop.orders", find={"_id": 150}, to="shard02")
    c.shop.orders.insert_many([{"_id": i, "v": 0} for i in range(SHARDED)])
    c.shop.plain.insert_many([{"_id": "p%d" % i, "v": 0} for i in range(UNSHARDED)])
    return c


def update_and_move_chunks(sim, written, stop, seed=8):
    """Until stop is set: $set v = n (1, 2, ...) on a random shop.orders
    document, n appended to written; every 40th update also moves a random
    document's chunk, to shard01 or shard02 in turn."""
    import random
    rnd = random.Random(seed)
    w = sim.client()
    n = 0
    while not stop.is_set():
        n += 1
        w.shop.orders.update_one({"_id": rnd.randrange(SHARDED)}, {"$set": {"v": n}})
        written.append(n)
        if n % 40 == 0:
            try:
                w.admin.command("moveChunk", "shop.orders", find={"_id": rnd.randrange(SHARDED)},
                                to="shard01" if n % 80 == 0 else "shard02")
            except Exception:
                pass  # the chunk is already there
        time.sleep(0.01)
    w.close()


def ids_of(recs, ops):
    return [json.loads(key_id_text(r)) for r in recs if r.op in ops]


def offsets(workdir):
    p = workdir / "offsets.json"
    return json.loads(p.read_text()) if p.exists() else {}


def shard_partitions(workdir):
    """{rs: offset value} of the stored offsets file."""
    out = {}
    for k, v in offsets(workdir).items():
        name, part = json.loads(k)
        assert name == PREFIX and part["server_id"] == PREFIX
        out[part["rs"]] = v
    return out


def check_snapshot(recs):
    """Every document exactly once, keyed {"id": <_id>} whatever shard it is on."""
    snap = [r for r in recs if r.op == "r"]
    by_topic = {}
    for r in snap:
        by_topic.setdefault(r.topic, []).append(r)
    assert sorted(by_topic) == ["it.shop.orders", "it.shop.plain"], "topics must not name the shard"
    orders = sorted(ids_of(by_topic["it.shop.orders"], ("r",)))
    assert orders == list(range(SHARDED)), "sharded collection not read exactly once"
    plain = sorted(ids_of(by_topic["it.shop.plain"], ("r",)))
    assert plain == sorted("p%d" % i for i in range(UNSHARDED))
    for r in snap:
        assert r.key == expected_key(json.loads(key_id_text(r)))
    check_last_per_shard(snap)


def check_last_per_shard(snap):
    """Debezium 1.x snapshots each replica set in its own thread with its own
    snapshot receiver (MongoDbSnapshotChangeEventSource.createDataEvents
    @v1.9.8.Final: dispatcher.getSnapshotChangeEventReceiver(), a new
    BufferingSnapshotChangeRecordReceiver per call, and completeSnapshot(),
    which marks the one record it holds back "last", once per replica set),
    so every shard's final `r` record, and only that one, is "last". 2.6+/3.x
    snapshot the deployment once (one receiver): the merged stream's one
    "last"."""
    by_rs = {}
    for r in snap:
        by_rs.setdefault(r.payload["source"]["rs"], []).append(r)
    for rs, recs in by_rs.items():
        marks = [r.snapshot for r in recs]
        assert marks[-1] == "last", "shard %s: its last snapshot record is %r" % (rs, marks[-1])
        assert marks.count("last") == 1, "shard %s: %d records marked last" % (
            rs, marks.count("last"))
        assert set(marks[:-1]) <= {"true"}, set(marks[:-1])


@pytest.mark.parametrize("seed,mode", [("mongos", "change_streams"),
                                       ("config_servers", "change_streams"),
                                       ("config_servers", "oplog")])
def test_discovery_snapshot_and_streaming_on_every_shard(tmp_workdir, start_mongocdc, seed, mode):
    """Also in legacy oplog mode (capture.mode: oplog): each shard task tails
    its own shard's local.oplog.rs, fromMigrate entries never produce events."""
    sim = start_sharded_sim()
    try:
        c = populate(sim)
        uri = sim.uri if seed == "mongos" else sim.config_uri
        if mode == "oplog":
            cfg = write_config(tmp_workdir, uri, raw={"capture.mode": "oplog"})
        else:
            cfg = write_config(tmp_workdir, uri)
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "tailing local.oplog.rs of" if mode == "oplog"
                 else "streaming changes from", 120, d, n=2)
        log = log_text(tmp_workdir)
        want = "mongos found" if seed == "mongos" else "config server replica set found"
        assert want in log
        for shard in ("shard01", "shard02"):
            assert "shard %s: replica set %s" % (shard, shard) in log
            assert "[%s]" % shard in log, "the task's log lines name its shard"
        check_snapshot(sink_records(tmp_workdir))

        # Streaming: writes on both shards through mongos, and a chunk migration
        # meanwhile, which must produce no event (fromMigrate, §6.6).
        for i in range(0, SHARDED, 10):
            c.shop.orders.update_one({"_id": i}, {"$set": {"v": 1}})
        c.admin.command("moveChunk", "shop.orders", find={"_id": 10}, to="shard02")
        for i in range(0, SHARDED, 10):
            c.shop.orders.update_one({"_id": i}, {"$set": {"v": 2}})
        c.shop.orders.insert_one({"_id": 1000, "v": 0})
        c.shop.orders.delete_one({"_id": 5})
        c.shop.plain.update_one({"_id": "p1"}, {"$set": {"v": 1}})
        n_want = 2 * (SHARDED // 10) + 3

        def streamed():
            return [r for r in sink_records(tmp_workdir) if r.op in ("c", "u", "d")]
        wait_until(lambda: len(streamed()) >= n_want, 60, "%d streamed events" % n_want)
        time.sleep(1.5)  # anything the migration would have produced
        got = streamed()
        assert len(got) == n_want, "the chunk migration produced events or some were duplicated"
        assert sorted(ids_of(got, ("c",))) == [1000]
        assert ids_of(got, ("d",)) == [5]
        for i in range(0, SHARDED, 10):
            vs = [r.payload for r in got if r.op == "u" and json.loads(key_id_text(r)) == i]
            assert len(vs) == 2, "document %d: %d updates" % (i, len(vs))
        by_shard = {}
        for r in got:
            by_shard.setdefault(r.payload["source"]["rs"], 0)
            by_shard[r.payload["source"]["rs"]] += 1
        assert set(by_shard) == {"shard01", "shard02"}, "events from every shard: %r" % by_shard
        assert {r.topic for r in got if r.payload["source"]["collection"] == "orders"} == \
            {"it.shop.orders"}
        assert d.stop(timeout_s=30) == 0
        parts = shard_partitions(tmp_workdir)
        assert sorted(parts) == ["shard01", "shard02"], "one offsets partition per shard"
        if mode == "oplog":
            assert all("resume_token" not in v and v["sec"] > 0 for v in parts.values()), parts
        else:
            assert all("resume_token" in v for v in parts.values())
        c.close()
    finally:
        sim.stop()


def test_restarts_resume_every_shard(tmp_workdir, start_mongocdc):
    """SIGTERM: nothing replayed, nothing lost on any shard. SIGKILL: nothing
    lost; replays allowed only after each shard's committed offset."""
    sim = start_sharded_sim()
    try:
        c = populate(sim)
        cfg1 = write_config(tmp_workdir, sim.uri, name="run1.yaml",
                            sink_path=tmp_workdir / "run1.jsonl")
        d = start_mongocdc("-c", cfg1)
        wait_log(tmp_workdir, "streaming changes from", 120, d, n=2)
        assert d.stop(timeout_s=30) == 0
        check_snapshot(sink_records(tmp_workdir / "run1.jsonl"))

        # Changes on both shards while mongocdc is down.
        for i in range(0, SHARDED, 20):
            c.shop.orders.update_one({"_id": i}, {"$set": {"v": 1}})
        cfg2 = write_config(tmp_workdir, sim.uri, name="run2.yaml",
                            sink_path=tmp_workdir / "run2.jsonl",
                            **{"offsets.flush.interval.ms": 1500})
        d2 = start_mongocdc("-c", cfg2)

        def run2_updates():
            return ids_of(sink_records(tmp_workdir / "run2.jsonl"), ("u",))
        wait_until(lambda: len(run2_updates()) >= SHARDED // 20, 60, "run 2 catches up")
        run2 = sink_records(tmp_workdir / "run2.jsonl")
        assert not [r for r in run2 if r.op == "r"], "the snapshot was redone"
        assert sorted(ids_of(run2, ("u",))) == list(range(0, SHARDED, 20)), \
            "a gap or a duplicate after a clean restart"

        # Writes while running, then SIGKILL, more writes, restart.
        for i in range(1, SHARDED, 20):
            c.shop.orders.update_one({"_id": i}, {"$set": {"v": 1}})
        wait_until(lambda: len(run2_updates()) >= SHARDED // 10, 60, "run 2 streams")
        d2.proc.kill()
        d2.proc.wait(timeout=10)
        for i in range(2, SHARDED, 20):
            c.shop.orders.update_one({"_id": i}, {"$set": {"v": 1}})
        cfg3 = write_config(tmp_workdir, sim.uri, name="run3.yaml",
                            sink_path=tmp_workdir / "run3.jsonl")
        d3 = start_mongocdc("-c", cfg3)
        want = set(range(0, SHARDED, 20)) | set(range(1, SHARDED, 20)) | set(range(2, SHARDED, 20))
        wait_until(lambda: set(ids_of(sink_records(tmp_workdir / "run2.jsonl") +
                                      sink_records(tmp_workdir / "run3.jsonl"), ("u",))) >= want,
                   60, "run 3 catches up")
        run3 = sink_records(tmp_workdir / "run3.jsonl")
        assert not [r for r in run3 if r.op == "r"], "the snapshot was redone after SIGKILL"
        assert set(ids_of(run3, ("u",))) >= set(range(2, SHARDED, 20))
        assert d3.stop(timeout_s=30) == 0
        assert sorted(shard_partitions(tmp_workdir)) == ["shard01", "shard02"]
        c.close()
    finally:
        sim.stop()


def test_shard_added_and_removed_while_running(tmp_workdir, start_mongocdc):
    """config.shards is polled: an added shard gets a task reading from the
    moment it joined (no snapshot: it holds only migrated documents); a
    removed shard's task stops, its offsets stay."""
    sim = start_sharded_sim()
    try:
        c = populate(sim)
        cfg = write_config(tmp_workdir, sim.uri, **{"mongodb.poll.interval.ms": 300})
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "streaming changes from", 120, d, n=2)
        added = sim.control("add_shard", members=1)["shardAdded"]
        wait_log(tmp_workdir, "shard %s added to the cluster" % added, 30, d)
        wait_log(tmp_workdir, "[%s] streaming changes from" % added, 30, d)
        # Documents [100, 200) move to the new shard, then change there.
        c.admin.command("moveChunk", "shop.orders", find={"_id": 150}, to=added)
        for i in range(100, 200, 10):
            c.shop.orders.update_one({"_id": i}, {"$set": {"v": 7}})

        def on_new_shard():
            return [r for r in sink_records(tmp_workdir)
                    if r.op in ("c", "u", "d") and r.payload["source"]["rs"] == added]
        wait_until(lambda: len(on_new_shard()) >= 10, 60, "events of the added shard")
        got = on_new_shard()
        assert sorted(ids_of(got, ("u",))) == list(range(100, 200, 10))
        recs = sink_records(tmp_workdir)
        assert not [r for r in recs if r.op == "r" and r.payload["source"]["rs"] == added], \
            "the added shard's migrated documents were snapshotted"
        assert len([r for r in recs if r.op == "r"]) == SHARDED + UNSHARDED

        # Drain shard02 (it holds no chunk now: move nothing) and remove it.
        assert sim.control("remove_shard", name="shard02")["state"] == "started"
        assert sim.control("remove_shard", name="shard02")["state"] == "completed"
        wait_log(tmp_workdir, "shard shard02 removed from the cluster", 30, d, n=1)
        wait_log(tmp_workdir, "capture of shard02 stopped cleanly", 30, d, n=1)
        assert d.running(), "the other tasks must go on"
        c.shop.orders.update_one({"_id": 0}, {"$set": {"v": 9}})
        wait_until(lambda: any(r.op == "u" and r.payload["after"] and '"v": 9' in r.payload["after"]
                               for r in sink_records(tmp_workdir)), 30,
                   "shard01 still streams")
        assert d.stop(timeout_s=30) == 0
        assert sorted(shard_partitions(tmp_workdir)) == sorted(["shard01", "shard02", added])
        c.close()
    finally:
        sim.stop()


def test_one_shard_unreachable_the_others_go_on(tmp_workdir, start_mongocdc):
    """A shard whose only member is down: its task retries with backoff while
    the other shard keeps streaming; when the member is back the task resumes
    from its stored position with nothing lost."""
    sim = start_sharded_sim()
    try:
        c = populate(sim)
        cfg = write_config(tmp_workdir, sim.uri, **{"connect.max.attempts": 50})
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "streaming changes from", 120, d, n=2)
        sim.control("unreachable", shard="shard02", member=0)
        for i in range(0, 100, 10):   # shard01's documents
            c.shop.orders.update_one({"_id": i}, {"$set": {"v": 3}})

        def updated():
            return ids_of(sink_records(tmp_workdir), ("u",))
        wait_until(lambda: len(updated()) >= 10, 60, "shard01 streams while shard02 is down")
        assert sorted(updated()) == list(range(0, 100, 10))
        assert d.running()
        sim.control("reachable", shard="shard02", member=0)
        sim.control("elect", shard="shard02", member=0)
        for i in range(100, 200, 10):  # shard02's documents
            c.shop.orders.update_one({"_id": i}, {"$set": {"v": 3}})
        wait_until(lambda: len(updated()) >= 20, 90, "shard02 resumes")
        assert sorted(updated()) == list(range(0, 200, 10))
        assert d.stop(timeout_s=30) == 0
        c.close()
    finally:
        sim.stop()


def test_snapshot_with_orphans_reads_every_document_once(tmp_workdir, start_mongocdc):
    """Orphans (documents a migration left on the donor until range deletion)
    and unowned copies (as a migration in flight leaves on the recipient) are
    on the shards' primaries, which each task reads directly: the snapshot
    keeps only the chunks each shard owns, so every document is read once,
    in its owner's version. The later range deletion produces no event."""
    sim = start_sharded_sim()
    try:
        c = populate(sim)
        sim.control("orphans", keep=True)
        # [100, max) goes back to shard01: shard02 keeps 100 orphans.
        c.admin.command("moveChunk", "shop.orders", find={"_id": 150}, to="shard01")
        # An unowned copy on shard02 of a document shard01 owns.
        import pymongo
        direct = pymongo.MongoClient(sim.shard_uris["shard02"], serverSelectionTimeoutMS=10000)
        direct.shop.orders.insert_one({"_id": 50, "v": "stale copy"})
        assert direct.shop.orders.count_documents({}) == 101
        direct.close()
        assert len(list(c.shop.orders.find({}))) == SHARDED, "mongos must not return orphans"

        cfg = write_config(tmp_workdir, sim.uri, **{"metrics.enabled": True,
                                                    "metrics.http.port": 0})
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "streaming changes from", 120, d, n=2)
        recs = sink_records(tmp_workdir)
        check_snapshot(recs)
        r50 = [r for r in recs if r.op == "r" and json.loads(key_id_text(r)) == 50]
        assert "stale copy" not in r50[0].payload["after"]
        assert "orphans skipped" in log_text(tmp_workdir)
        # The remaining-documents gauge counts what each shard owns, not its
        # orphans: 0 on both tasks once their snapshots are done (shard02's
        # primary holds 101 documents of shop.orders and owns none).
        from test_metrics import get, metrics_port, samples
        s = samples(get(metrics_port(tmp_workdir, d), "/metrics")[1])
        for shard, docs in (("shard01", SHARDED + UNSHARDED), ("shard02", 0)):
            t = 'task="%s"' % shard
            assert s["mongocdc_snapshot_documents_done{%s}" % t] == docs, (shard, s)
            assert s["mongocdc_snapshot_documents_remaining{%s}" % t] == 0, (shard, s)

        deleted = sim.control("clean_orphans")["deleted"]
        assert deleted == 100
        c.shop.orders.update_one({"_id": 150}, {"$set": {"v": 5}})
        wait_until(lambda: [r for r in sink_records(tmp_workdir) if r.op == "u"], 30,
                   "the update after the clean-up")
        time.sleep(1)
        streamed = [r for r in sink_records(tmp_workdir) if r.op in ("c", "u", "d")]
        assert [(r.op, json.loads(key_id_text(r))) for r in streamed] == [("u", 150)], \
            "range deletion (fromMigrate) must produce no event"
        assert d.stop(timeout_s=30) == 0
        c.close()
    finally:
        sim.stop()


@pytest.mark.parametrize("discover", [True, False])
def test_step_down_on_one_shard(tmp_workdir, start_mongocdc, discover):
    """An election on shard02 (its primary steps down, the other member takes
    over): shard02's task follows the new primary and resumes its stream,
    shard01's task is not disturbed, nothing is lost or duplicated. With
    mongodb.members.auto.discover false the tasks use the two addresses of
    each shard's config.shards host as given (topology/primary.h) and find
    the new primary among them themselves."""
    sim = start_sharded_sim(members=2)
    try:
        c = populate(sim)
        cfg = write_config(tmp_workdir, sim.uri,
                           raw={"mongodb.members.auto.discover": discover})
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "streaming changes from", 120, d, n=2)
        for i in range(0, SHARDED, 10):
            c.shop.orders.update_one({"_id": i}, {"$set": {"v": 1}})
        assert sim.control("stepdown", shard="shard02")["elected"] is not None
        for i in range(0, SHARDED, 10):
            c.shop.orders.update_one({"_id": i}, {"$set": {"v": 2}})

        def updated():
            return ids_of(sink_records(tmp_workdir), ("u",))
        wait_until(lambda: len(updated()) >= 2 * (SHARDED // 10), 90, "updates on both shards")
        time.sleep(1)
        assert sorted(updated()) == sorted(list(range(0, SHARDED, 10)) * 2), \
            "lost or duplicated across the election"
        if not discover:
            assert "shard02 at " in log_text(tmp_workdir) and \
                "is no longer primary" in log_text(tmp_workdir)
        assert d.running()
        assert d.stop(timeout_s=30) == 0
        c.close()
    finally:
        sim.stop()


def test_sigkill_loop_with_chunk_moves_loses_nothing(tmp_workdir, start_mongocdc):
    """Repeated SIGKILLs, the first right after start (before the initial
    snapshot completes), the others while documents are written and chunks
    move between the shards: every change reaches the sink at least once and
    every document is in a snapshot."""
    import threading
    sim = start_sharded_sim()
    try:
        c = populate(sim)
        written = []
        stop = threading.Event()
        t = threading.Thread(target=update_and_move_chunks, args=(sim, written, stop),
                             daemon=True)
        runs = []
        for k in range(4):
            sink = tmp_workdir / ("run%d.jsonl" % k)
            cfg = write_config(tmp_workdir, sim.uri, name="run%d.yaml" % k, sink_path=sink,
                               **{"offsets.flush.interval.ms": 300})
            d = start_mongocdc("-c", cfg)
            runs.append(sink)
            if k == 0:
                time.sleep(0.05)  # inside the snapshot
            else:
                if k == 1:
                    # Changes before a snapshot's start are in the snapshot, not
                    # in the stream: write once the redone snapshot is complete.
                    wait_log(tmp_workdir, "streaming changes from", 60, d, n=2)
                    t.start()
                time.sleep(1.5)
            d.proc.kill()
            d.proc.wait(timeout=10)
        stop.set()
        t.join(timeout=30)
        final = tmp_workdir / "final.jsonl"
        cfg = write_config(tmp_workdir, sim.uri, name="final.yaml", sink_path=final)
        d = start_mongocdc("-c", cfg)
        want = set(written)

        def seen():
            vals = set()
            for p in runs + [final]:
                for r in sink_records(p):
                    if r.op == "u":
                        vals.add(r.updated_fields()["v"])
            return vals
        try:
            wait_until(lambda: seen() >= want, 60, "every change after the kills")
        except TimeoutError:
            missing = sorted(want - seen())
            raise AssertionError("%d of %d changes lost, e.g. %r" % (len(missing), len(want),
                                                                    missing[:10]))
        snapped = set()
        for p in runs + [final]:
            snapped |= set(ids_of(sink_records(p), ("r",)))
        assert set(range(SHARDED)) <= snapped, "a document is in no snapshot"
        print("SIGKILL loop with chunk moves: %d changes, none lost" % len(want))
        assert d.stop(timeout_s=30) == 0
        c.close()
    finally:
        sim.stop()


def test_oplog_mode_follows_a_cross_shard_transaction(tmp_workdir, start_mongocdc):
    """Oplog mode: a transaction writing on two shards is committed by two-phase
    commit (a prepare applyOps entry, then commitTransaction on each shard);
    each shard's task emits its part when the commitTransaction arrives, and an
    aborted transaction produces nothing."""
    sim = start_sharded_sim()
    try:
        c = populate(sim)
        cfg = write_config(tmp_workdir, sim.config_uri, raw={"capture.mode": "oplog"})
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "tailing local.oplog.rs of", 120, d, n=2)
        with c.start_session() as s:
            with s.start_transaction():
                c.shop.orders.insert_one({"_id": 5000, "v": 0}, session=s)    # shard02
                c.shop.orders.update_one({"_id": 20}, {"$set": {"v": 9}}, session=s)  # shard01
        with c.start_session() as s:
            s.start_transaction()
            c.shop.orders.insert_one({"_id": 6000, "v": 0}, session=s)
            c.shop.orders.update_one({"_id": 30}, {"$set": {"v": 9}}, session=s)
            s.abort_transaction()
        c.shop.orders.insert_one({"_id": 7000, "v": 0})  # after both: a marker

        def streamed():
            return [r for r in sink_records(tmp_workdir) if r.op in ("c", "u", "d")]
        wait_until(lambda: 7000 in ids_of(streamed(), ("c",)), 60, "the marker insert")
        time.sleep(1.0)
        got = streamed()
        assert sorted(ids_of(got, ("c",))) == [5000, 7000], got
        assert ids_of(got, ("u",)) == [20], "the committed update, not the aborted one"
        assert {r.payload["source"]["rs"] for r in got if json.loads(key_id_text(r)) in (5000, 20)} \
            == {"shard01", "shard02"}
        assert d.stop(timeout_s=30) == 0
        c.close()
    finally:
        sim.stop()


def test_offsets_of_different_capture_modes_across_shards_are_refused(tmp_workdir,
                                                                     start_mongocdc):
    """debezium-format.md §4.4: shard01's offsets by change streams, shard02's
    by oplog capture: no single capture.mode continues both, so mongocdc
    refuses to start, naming the shards (Debezium logs it and carries on)."""
    sim = start_sharded_sim()
    try:
        populate(sim).close()
        cfg = write_config(tmp_workdir, sim.config_uri)
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "streaming changes from", 120, d, n=2)
        assert d.stop(timeout_s=30) == 0
        path = tmp_workdir / "offsets.json"
        stored = json.loads(path.read_text())
        for k, v in stored.items():
            if json.loads(k)[1]["rs"] == "shard02":
                v.pop("resume_token", None)
                v["mongocdc_capture_mode"] = "oplog"
                v["sec"], v["ord"] = int(time.time()) - 5, 1
        path.write_text(json.dumps(stored))
        for mode in ("change_streams", "oplog"):
            cfg2 = write_config(tmp_workdir, sim.config_uri, name="cfg-%s.yaml" % mode,
                                raw={"capture.mode": mode})
            d2 = start_mongocdc("-c", cfg2)
            assert d2.proc.wait(timeout=60) == 1
            log = log_text(tmp_workdir)
            assert "stored offsets of shards shard02 were written by oplog capture, those of " \
                "shards shard01 by change streams" in log, log[-2000:]
        assert json.loads(path.read_text()) == stored, "the refused start left the offsets alone"
    finally:
        sim.stop()
