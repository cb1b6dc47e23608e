"""Writes that MongoDB rolls back are never published.

A primary that loses its majority still takes w:1 writes; a failover rolls them back
(MongoDB's replication README, "Rollback"). On the simulator (tests/mongosim: control
`no_majority` freezes the commit point, `stepdown` with `rollback: true` elects a member
whose history ends there and undoes the writes past it), in both capture modes, on a
replica set and on one shard of a sharded cluster: no rolled-back change reaches the
sink, every committed change does, and the daemon keeps streaming. Also a SIGKILL while
entries past the commit point are held, and a stored position that a rollback removed.

The file sink stands in for Kafka (each record line holds key and value bytes).
"""

import functools
import json
import time

import pytest

from conftest import import_mongosim, wait_until
from pipeline_support import log_text, sink_records, write_config

PREFIX = "it"
COMMITTED = list(range(10))
ROLLED_BACK_INSERTS = [100, 101, 102, 105, 106]
AFTER = list(range(200, 210))


# Records with an op: snapshot reads and changes (tombstones have none).
records = functools.partial(sink_records, ops=("c", "u", "d", "r"))


def key_id(r):
    return json.loads(json.loads(r.key)["id"])


def start_sim(sharded):
    mongosim = import_mongosim()
    if sharded:
        sim = mongosim.MongoSim(topology="sharded", shards=2, members=2, noop_interval=0.3)
    else:
        sim = mongosim.MongoSim(topology="replset", members=3, noop_interval=0.3)
    sim.start()
    return sim


def config(workdir, sim, mode, sink=None, name="cfg.yaml", **opts):
    raw = {"capture.mode": mode, "snapshot.mode": "no_data",
           "mongodb.server.selection.timeout.ms": 1000, "connect.max.attempts": 60,
           "connect.backoff.initial.delay.ms": 200, "connect.backoff.max.delay.ms": 1000}
    if mode == "oplog":
        raw["debezium.compatibility"] = "1.9"
    raw.update(opts)
    return write_config(workdir, sim.uri, name=name, sink_path=sink, raw=raw)


def streaming_lines(workdir):
    log = log_text(workdir)
    return log.count("tailing local.oplog.rs of") + log.count("streaming changes from")


def wait_streaming(workdir, d, n):
    def check():
        if not d.running():
            raise AssertionError("mongocdc exited: %s" % log_text(workdir)[-3000:])
        return streaming_lines(workdir) >= n
    wait_until(check, 120, "%d streaming task(s)" % n)


def committed_writes(coll):
    coll.insert_many([{"_id": i, "v": 0} for i in COMMITTED])


def uncommitted_writes(c, coll):
    """w:1 writes past the frozen commit point: inserts, an update, a delete and a
    transaction; every one carries zz_rolled_back: true where it leaves a document."""
    coll.insert_one({"_id": 100, "zz_rolled_back": True})
    coll.insert_many([{"_id": 101, "zz_rolled_back": True}, {"_id": 102, "zz_rolled_back": True}])
    coll.update_one({"_id": 0}, {"$set": {"zz_rolled_back": True}})
    coll.delete_one({"_id": 1})
    with c.start_session() as s:
        with s.start_transaction():
            coll.insert_one({"_id": 105, "zz_rolled_back": True}, session=s)
            coll.insert_one({"_id": 106, "zz_rolled_back": True}, session=s)
            coll.update_one({"_id": 2}, {"$set": {"zz_rolled_back": True}}, session=s)


def later_writes(coll):
    coll.insert_many([{"_id": i, "v": 1} for i in AFTER])
    coll.update_one({"_id": 3}, {"$set": {"v": 3}})
    coll.delete_one({"_id": 4})


def check_sink(path, inserts_before):
    recs = records(path)
    by = {}
    for r in recs:
        by.setdefault((r.op, key_id(r)), []).append(r)
    rolled = [k for k in by if k[1] in ROLLED_BACK_INSERTS or k in (("u", 0), ("d", 1), ("u", 2))]
    assert not rolled, "rolled-back changes published: %s" % rolled
    assert not [r for r in recs if "zz_rolled_back" in (r.value_raw or "")], "a rolled-back value was published"
    for i in inserts_before + AFTER:
        assert ("c", i) in by or ("r", i) in by, "committed insert %d missing" % i
    assert ("u", 3) in by and ("d", 4) in by
    return recs


def wait_for_after(path, d, workdir):
    def check():
        if not d.running():
            raise AssertionError("mongocdc exited: %s" % log_text(workdir)[-3000:])
        ids = {key_id(r) for r in records(path)}
        return set(AFTER) <= ids and any(r.op == "d" and key_id(r) == 4 for r in records(path))
    wait_until(check, 120, "the writes after the rollback")


def coll_of(c, sharded):
    # the sharded case writes to an unsharded collection: all of it on the database's
    # primary shard, the shard that loses its majority
    return c.rbdb.c


@pytest.mark.parametrize("sharded", [False, True], ids=["replset", "shard"])
@pytest.mark.parametrize("mode", ["oplog", "change_streams_update_full"])
def test_rolled_back_writes_are_never_published(tmp_workdir, start_mongocdc, mode, sharded):
    sim = start_sim(sharded)
    try:
        c = sim.client()
        ctl = {}
        if sharded:
            c.admin.command("enableSharding", "rbdb")
            ctl = {"shard": c.config.databases.find_one({"_id": "rbdb"})["primary"]}
        coll = coll_of(c, sharded)
        committed_writes(coll)
        sink = tmp_workdir / "events.jsonl"
        d = start_mongocdc("-c", config(tmp_workdir, sim, mode))
        wait_streaming(tmp_workdir, d, 2 if sharded else 1)
        coll.insert_one({"_id": 50})  # committed, while streaming
        wait_until(lambda: 50 in {key_id(r) for r in records(sink)}, 60, "the committed insert")

        sim.control("no_majority", on=True, **ctl)
        uncommitted_writes(c, coll)
        time.sleep(2.0)  # several getMores and commit-point reads: nothing may come out
        assert not [r for r in records(sink) if key_id(r) in ROLLED_BACK_INSERTS + [0, 1, 2]], \
            "a change past the commit point was published"
        r = sim.control("stepdown", rollback=True, **ctl)
        assert r["rollback"]["entries"] >= 5

        c2 = sim.client()
        later_writes(coll_of(c2, sharded))
        wait_for_after(sink, d, tmp_workdir)
        check_sink(sink, [50])
        if mode == "oplog":
            assert "a failover rolled them back" in log_text(tmp_workdir), "no WARN about the rolled-back entries"
        assert d.running()
        coll_of(c2, sharded).insert_one({"_id": 300})
        wait_until(lambda: 300 in {key_id(r) for r in records(sink)}, 60, "streaming afterwards")
        assert d.stop(timeout_s=30) == 0
    finally:
        sim.stop()


@pytest.mark.parametrize("mode", ["oplog", "change_streams"])
def test_sigkill_while_writes_are_past_the_commit_point(tmp_workdir, start_mongocdc, mode):
    sim = start_sim(False)
    try:
        c = sim.client()
        coll = c.rbdb.c
        committed_writes(coll)
        run1 = tmp_workdir / "run1.jsonl"
        d = start_mongocdc("-c", config(tmp_workdir, sim, mode, sink=run1, name="run1.yaml"))
        wait_streaming(tmp_workdir, d, 1)
        coll.insert_one({"_id": 50})
        wait_until(lambda: 50 in {key_id(r) for r in records(run1)}, 60, "the committed insert")
        sim.control("no_majority", on=True)
        uncommitted_writes(c, coll)
        time.sleep(1.5)
        d.proc.kill()
        d.proc.wait(timeout=10)
        # restarted while the writes are still past the point: they stay held
        run2 = tmp_workdir / "run2.jsonl"
        d2 = start_mongocdc("-c", config(tmp_workdir, sim, mode, sink=run2, name="run2.yaml"))
        wait_streaming(tmp_workdir, d2, 1)
        time.sleep(1.5)
        sim.control("stepdown", rollback=True)
        later_writes(sim.client().rbdb.c)
        wait_for_after(run2, d2, tmp_workdir)
        merged = tmp_workdir / "all.jsonl"
        merged.write_bytes(run1.read_bytes() + run2.read_bytes())
        check_sink(merged, [50])
        assert d2.stop(timeout_s=30) == 0
    finally:
        sim.stop()


def test_stored_position_rolled_back_is_reported_and_passed(tmp_workdir, start_mongocdc):
    """The snapshot's start position (1.9: the newest oplog entry) lies past the commit
    point: the copy (readConcern majority after that position) waits; the failover rolls
    the position back, the copy then reads only committed documents, and the reader finds
    its position gone, says so at WARN with the range and continues after the common
    point with the new primary's history."""
    sim = start_sim(False)
    try:
        c = sim.client()
        coll = c.rbdb.c
        committed_writes(coll)
        sim.control("no_majority", on=True)
        uncommitted_writes(c, coll)
        d = start_mongocdc("-c", config(tmp_workdir, sim, "oplog", **{"snapshot.mode": "initial"}))
        wait_until(lambda: "initial snapshot starting" in log_text(tmp_workdir), 60, "the snapshot")
        sink = tmp_workdir / "events.jsonl"
        time.sleep(1.5)
        # the copy waits for its start position (the newest entry) to be committed
        assert not [r for r in records(sink) if r.op == "r"]
        sim.control("stepdown", rollback=True)
        wait_streaming(tmp_workdir, d, 1)
        snap = {key_id(r) for r in records(sink) if r.op == "r"}
        assert snap == set(COMMITTED), "the snapshot read %s" % sorted(snap)
        later_writes(sim.client().rbdb.c)
        wait_for_after(sink, d, tmp_workdir)
        check_sink(sink, [])
        log = log_text(tmp_workdir)
        assert "rollback: the position Timestamp(" in log and "rolled back the entries after" in log
        assert d.stop(timeout_s=30) == 0
    finally:
        sim.stop()


def test_change_stream_snapshot_reads_only_committed_documents(tmp_workdir, start_mongocdc):
    """Change-stream mode: an initial snapshot taken while w:1 writes sit past the commit
    point reads at readConcern majority, so none of them becomes a snapshot record (a read
    at local would publish documents the failover then rolls back); streaming afterwards
    has every committed change and none of the rolled-back ones."""
    sim = start_sim(False)
    try:
        c = sim.client()
        coll = c.rbdb.c
        committed_writes(coll)
        sim.control("no_majority", on=True)
        uncommitted_writes(c, coll)
        d = start_mongocdc("-c", config(tmp_workdir, sim, "change_streams_update_full",
                                        **{"snapshot.mode": "initial"}))
        wait_until(lambda: "initial snapshot starting" in log_text(tmp_workdir), 60, "the snapshot")
        time.sleep(1.5)
        sim.control("stepdown", rollback=True)
        wait_streaming(tmp_workdir, d, 1)
        sink = tmp_workdir / "events.jsonl"
        snap = {key_id(r) for r in records(sink) if r.op == "r"}
        assert snap == set(COMMITTED), "the snapshot read %s" % sorted(snap)
        later_writes(sim.client().rbdb.c)
        wait_for_after(sink, d, tmp_workdir)
        check_sink(sink, [])
        assert d.stop(timeout_s=30) == 0
    finally:
        sim.stop()


@pytest.mark.parametrize("mode", ["oplog", "change_streams"])
def test_new_history_reusing_the_rolled_back_timestamps(tmp_workdir, start_mongocdc, mode):
    """The new primary's entries take the rolled-back entries' timestamps in a new term (its
    clock had not seen the old primary's writes): the held entry's ts is now committed, but
    in another term, so it is recognised as rolled back (same ts, different term), never
    published, and the new entries at those timestamps are."""
    sim = start_sim(False)
    try:
        c = sim.client()
        coll = c.rbdb.c
        committed_writes(coll)
        sink = tmp_workdir / "events.jsonl"
        d = start_mongocdc("-c", config(tmp_workdir, sim, mode))
        wait_streaming(tmp_workdir, d, 1)
        coll.insert_one({"_id": 50})
        wait_until(lambda: 50 in {key_id(r) for r in records(sink)}, 60, "the committed insert")
        sim.control("no_majority", on=True)
        uncommitted_writes(c, coll)
        time.sleep(1.5)
        r = sim.control("stepdown", rollback=True, reuse_ts=True)
        later_writes(sim.client().rbdb.c)
        wait_for_after(sink, d, tmp_workdir)
        check_sink(sink, [50])
        if mode == "oplog":
            log = log_text(tmp_workdir)
            assert "Timestamp(%d, %d)" % (r["rollback"]["first"]["t"], r["rollback"]["first"]["i"]) in log
            assert "a failover rolled them back" in log
        assert d.stop(timeout_s=30) == 0
    finally:
        sim.stop()
