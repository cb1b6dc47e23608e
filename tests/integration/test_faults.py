"""Faults around the capture pipeline, on the simulator (file sink unless the
broker is the point):

  - primary step-down, dropped connections, killed cursors and a window with
    no reachable member: no change lost, no duplicate beyond the uncommitted
    tail, exponential backoff visible in the log;
  - history lost under each snapshot.mode (re-snapshot with a WARN naming the
    range, or exit 1 with an error that says what to do);
  - resume from an offset written by Debezium <= 2.6 (hex-only token);
  - an idle captured collection while another one is busy and the oplog rolls
    over: the stored position stays valid;
  - SIGTERM: bounded shutdown with the final offset written;
  - the Kafka broker paused mid-stream: no loss, memory bounded.
"""

import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from bson import BSON
import base64

from conftest import BUILD_DIR, SOURCE_DIR, wait_until
from pipeline_support import (Sim, data_records, dataset_loads, key_id_text, log_text,
                              offsets_value, read_jsonl, read_topics, wait_streaming, write_config)

PREFIX = "it"


def streamed(path, topic=None):
    recs = [r for r in data_records(read_jsonl(path), PREFIX) if r.op in ("c", "u", "d")]
    if topic:
        recs = [r for r in recs if r.topic == PREFIX + "." + topic]
    return recs


def ids(recs, op=None):
    return [json.loads(key_id_text(r)) for r in recs if op is None or r.op == op]


def insert_retrying(coll, doc, attempts=60):
    """insert_one that survives elections and dropped connections; a
    duplicate-key error after a lost reply means the first try was applied."""
    from pymongo.errors import DuplicateKeyError, PyMongoError
    for _ in range(attempts):
        try:
            coll.insert_one(doc)
            return
        except DuplicateKeyError:
            return
        except PyMongoError:
            time.sleep(0.25)
    raise AssertionError("insert of %r kept failing" % (doc,))


def test_stepdown_and_dropped_connections_lose_nothing(tmp_workdir, users_sim, start_mongocdc):
    sim = users_sim
    cfg = write_config(tmp_workdir, sim.uri, **{"mongodb.server.selection.timeout.ms": 1000,
                                                "connect.backoff.initial.delay.ms": 250,
                                                "connect.backoff.max.delay.ms": 1000,
                                                "connect.max.attempts": 40})
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir, d)
    c = sim.client(retryWrites=True)
    coll = c.itdb.faults
    n = 0

    def batch(k):
        nonlocal n
        for _ in range(k):
            insert_retrying(coll, {"_id": n, "v": 0})
            n += 1

    batch(20)
    sim.control("stepdown", no_primary_ms=1500)
    batch(20)
    sim.control("drop_connections")
    batch(20)
    sim.control("kill_cursors", kind="changeStream")
    batch(20)
    sim.control("fail", commands=["getMore"], closeConnection=True, times=2)
    batch(20)
    # every member unreachable for a while: capture must back off, then resume
    members = sim.control("status")["members"]
    for m in members:
        sim.control("unreachable", member=m["idx"], elect=False)
    time.sleep(4)
    for m in members:
        sim.control("reachable", member=m["idx"])
    sim.control("elect", member=0)
    batch(20)

    wait_until(lambda: len(set(ids(streamed(tmp_workdir / "events.jsonl")))) >= n, 90,
               "all %d inserts" % n)
    got = ids(streamed(tmp_workdir / "events.jsonl"), "c")
    assert sorted(set(got)) == list(range(n)), "a change is missing"
    first = {}
    for i, k in enumerate(got):
        first.setdefault(k, i)
    assert sorted(first, key=first.get) == list(range(n)), "inserts out of order"
    dups = len(got) - n
    log = log_text(tmp_workdir)
    delays = [int(x) for x in re.findall(r"reconnecting in (\d+) ms", log)]
    assert delays, "no reconnect in the log"
    assert any(b > a for a, b in zip(delays, delays[1:])), "backoff did not grow: %s" % delays
    print("\nfaults: %d inserts, %d duplicates, reconnect delays %s" % (n, dups, delays))
    assert d.stop(timeout_s=30) == 0


def _stored_then_lost(sim, tmp_workdir, start_mongocdc, mode):
    """Runs mongocdc once (mode), stores a position, stops it; then writes
    and truncates the oplog so that the stored position is gone."""
    cfg = write_config(tmp_workdir, sim.uri, name="run1.yaml",
                       sink_path=tmp_workdir / "run1.jsonl", **{"snapshot.mode": mode})
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir, d)
    c = sim.client()
    c.itdb.lost.insert_one({"_id": "before", "v": 0})
    wait_until(lambda: ids(streamed(tmp_workdir / "run1.jsonl")) == ["before"], 30, "run 1 event")
    assert d.stop(timeout_s=30) == 0
    stored = offsets_value(tmp_workdir)
    assert stored and "resume_token" in stored
    for i in range(20):
        c.itdb.lost.insert_one({"_id": "gone%d" % i, "v": 0})
    sim.control("truncate_oplog", keep=3)
    c.itdb.lost.insert_one({"_id": "after", "v": 0})
    return c


@pytest.mark.parametrize("mode", ["initial", "when_needed", "always"])
def test_history_lost_resnapshots(tmp_workdir, users_sim, start_mongocdc, mode):
    c = _stored_then_lost(users_sim, tmp_workdir, start_mongocdc, mode)
    cfg = write_config(tmp_workdir, users_sim.uri, name="run2.yaml",
                       sink_path=tmp_workdir / "run2.jsonl", **{"snapshot.mode": mode})
    d = start_mongocdc("-c", cfg)
    wait_until(lambda: "snapshot complete" in log_text(tmp_workdir), 60, "re-snapshot")
    log = log_text(tmp_workdir)
    assert re.search(r"WARN .*history lost.*no longer in the oplog", log), log[-2000:]
    warn = next(l for l in log.splitlines() if "history lost on" in l)
    # each fact once: the stored position, where the oplog now starts, the server's words
    assert warn.count("resume token at Timestamp(") == 1, warn
    assert re.search(r"no longer in the oplog, which now starts at Timestamp\(\d+, \d+\) "
                     r"\(Resume of change stream was not possible", warn), warn
    c.itdb.lost.insert_one({"_id": "later", "v": 0})
    wait_until(lambda: "later" in ids(streamed(tmp_workdir / "run2.jsonl")), 30, "streaming")
    recs = data_records(read_jsonl(tmp_workdir / "run2.jsonl"), PREFIX)
    reads = set(ids([r for r in recs if r.topic == PREFIX + ".itdb.lost"], "r"))
    # the lost inserts are not skipped silently: the new snapshot has them
    assert {"gone%d" % i for i in range(20)} | {"before", "after"} <= reads
    assert d.stop(timeout_s=30) == 0


@pytest.mark.parametrize("mode", ["never", "no_data"])
def test_history_lost_stops_with_a_clear_error(tmp_workdir, users_sim, start_mongocdc,
                                               run_mongocdc, mode):
    _stored_then_lost(users_sim, tmp_workdir, start_mongocdc, mode)
    cfg = write_config(tmp_workdir, users_sim.uri, name="run2.yaml",
                       sink_path=tmp_workdir / "run2.jsonl", **{"snapshot.mode": mode})
    r = run_mongocdc("-c", cfg, timeout_s=60)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1, err[-2000:]
    assert "no longer in the oplog" in err and "snapshot.mode" in err, err[-2000:]
    assert not read_jsonl(tmp_workdir / "run2.jsonl")


def test_resume_from_an_old_hex_only_token(tmp_workdir, users_sim, start_mongocdc):
    sim = users_sim
    # 3.x: the stored token is the Base64 of its BSON, rewritten below as 2.6 and
    # earlier stored it (the 1.9 layout writes the hex form itself)
    cfg = write_config(tmp_workdir, sim.uri, name="run1.yaml", sink_path=tmp_workdir / "run1.jsonl",
                       **{"debezium.compatibility": "3.x"})
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir, d)
    c = sim.client()
    c.itdb.hex.insert_one({"_id": 1})
    wait_until(lambda: ids(streamed(tmp_workdir / "run1.jsonl")) == [1], 30, "run 1")
    assert d.stop(timeout_s=30) == 0
    # rewrite the stored value as Debezium <= 2.6 wrote it: the `_data` hex only
    path = tmp_workdir / "offsets.json"
    doc = json.loads(path.read_text())
    key = next(iter(doc))
    val = doc[key]
    tok = BSON(base64.b64decode(val["resume_token"])).decode()
    doc[key] = {"sec": val["sec"], "ord": val["ord"], "h": None, "resume_token": tok["_data"]}
    path.write_text(json.dumps(doc))
    for i in range(2, 6):
        c.itdb.hex.insert_one({"_id": i})
    cfg2 = write_config(tmp_workdir, sim.uri, name="run2.yaml", sink_path=tmp_workdir / "run2.jsonl",
                        **{"debezium.compatibility": "3.x"})
    d2 = start_mongocdc("-c", cfg2)
    wait_until(lambda: len(streamed(tmp_workdir / "run2.jsonl")) >= 4, 30, "run 2")
    time.sleep(0.5)
    recs = data_records(read_jsonl(tmp_workdir / "run2.jsonl"), PREFIX)
    assert not [r for r in recs if r.op == "r"], "an old token must not trigger a snapshot"
    assert ids(streamed(tmp_workdir / "run2.jsonl")) == [2, 3, 4, 5]
    assert d2.stop(timeout_s=30) == 0


def test_idle_collection_position_survives_oplog_rollover(tmp_workdir, users_sim, start_mongocdc):
    sim = users_sim
    cfg = write_config(tmp_workdir, sim.uri, **{"collection.include.list": "itdb\\.idle"})
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir, d)
    c = sim.client()
    c.itdb.idle.insert_one({"_id": "first"})
    wait_until(lambda: ids(streamed(tmp_workdir / "events.jsonl")) == ["first"], 30, "first")
    time.sleep(0.5)
    at_first = offsets_value(tmp_workdir)
    # only the other collection is busy
    for i in range(300):
        c.itdb.busy.insert_one({"_id": i, "pad": "x" * 100})
    def moved():
        v = offsets_value(tmp_workdir)
        return v != at_first and v
    wait_until(moved, 30, "the stored position to advance while idle")
    time.sleep(1.0)
    assert d.stop(timeout_s=30) == 0
    # the oplog rolls over: only the newest entries remain
    sim.control("truncate_oplog", keep=5)
    c.itdb.idle.insert_one({"_id": "second"})
    d2 = start_mongocdc("-c", cfg)
    wait_until(lambda: "second" in ids(streamed(tmp_workdir / "events.jsonl")), 30, "second")
    log = log_text(tmp_workdir)
    assert "history lost" not in log and "snapshot complete" not in log
    assert ids(streamed(tmp_workdir / "events.jsonl")) == ["first", "second"]
    assert not [r for r in read_jsonl(tmp_workdir / "events.jsonl")
                if r.topic.startswith(PREFIX + ".itdb.busy")]
    assert d2.stop(timeout_s=30) == 0


@pytest.mark.parametrize("phase", ["streaming", "snapshot"])
def test_sigterm_shutdown_is_bounded_and_writes_offsets(tmp_workdir, shared_dir, start_mongocdc,
                                                        phase):
    loads = dataset_loads(shared_dir) if phase == "snapshot" else \
        dataset_loads(shared_dir, only={"sample_mflix.users"})
    sim = Sim(tmp_workdir, loads)
    try:
        await_ms, flush_ms = 1000, 2000
        extra = {}
        if phase == "snapshot":
            # slow enough that SIGTERM always lands mid-snapshot
            sim.control("delay", command="getMore", ms=200)
            extra = {"snapshot.fetch.size": 50}
        cfg = write_config(tmp_workdir, sim.uri, **{"cursor.max.await.time.ms": await_ms,
                                                    "offsets.flush.timeout.ms": flush_ms,
                                                    "offsets.flush.interval.ms": 60000}, **extra)
        d = start_mongocdc("-c", cfg)
        if phase == "snapshot":
            wait_until(lambda: "initial snapshot starting" in log_text(tmp_workdir), 30, "snapshot")
            time.sleep(0.2)
        else:
            wait_streaming(tmp_workdir, d)
            c = sim.client()
            stop = threading.Event()

            def write():
                i = 0
                while not stop.is_set():
                    c.itdb.term.insert_one({"_id": i})
                    i += 1
                    time.sleep(0.005)
            t = threading.Thread(target=write, daemon=True)
            t.start()
            time.sleep(1.5)
        t0 = time.monotonic()
        rc = d.stop(timeout_s=30)
        took = time.monotonic() - t0
        assert rc == 0, log_text(tmp_workdir)[-2000:]
        assert took <= (await_ms + flush_ms) / 1000.0 + 1.0, "shutdown took %.2fs" % took
        off = offsets_value(tmp_workdir)
        assert off, "no final offsets"
        if phase == "streaming":
            stop.set()
            t.join(timeout=5)
            recs = streamed(tmp_workdir / "events.jsonl")
            assert recs
            # the final offset is the last record written (flushed before exit)
            last = recs[-1].payload["source"]
            v = json.loads(off)
            v = v[next(iter(v))]
            assert (v["sec"], v["ord"]) == (last["ts_ms"] // 1000, last["ord"])
        else:
            assert "initsync" in off  # stopped mid-snapshot: it is redone next time
        print("\nSIGTERM during %s: exit 0 after %.2fs" % (phase, took))
    finally:
        sim.stop()


def _kafka_local_pid(bootstrap):
    """pid of the local broker when this run started it on `bootstrap`, else None."""
    port = bootstrap.rsplit(":", 1)[-1]
    dirs = [os.environ.get("KAFKA_LOCAL_DIR"), str(BUILD_DIR / "kafka-local")]
    for d in dirs:
        if not d:
            continue
        for pidfile in Path(d).glob("*.pid"):
            try:
                pid = int(pidfile.read_text().split()[0])
                cmd = Path("/proc/%d/cmdline" % pid).read_bytes().decode(errors="replace")
            except (OSError, ValueError, IndexError):
                continue
            if "kafka" in cmd.lower():
                props = list(Path(d).glob("**/*.properties"))
                if any(("127.0.0.1:%s" % port) in p.read_text(errors="replace") for p in props):
                    return pid
    return None


@pytest.fixture
def broker_pause_lock(kafka):
    """Held while a test may freeze the shared broker: other ctest processes
    using it (the Debezium switch test's Connect workers) wait meanwhile."""
    import kafka_support
    with kafka_support.broker_outage_lock(kafka.bootstrap, exclusive=True):
        yield


def test_kafka_broker_paused_mid_stream_loses_nothing(tmp_workdir, users_sim, kafka,
                                                      broker_pause_lock, start_mongocdc):
    if kafka.is_mock:
        pytest.skip("needs the real local broker (the mock cluster cannot be stopped from here)")
    pid = _kafka_local_pid(kafka.bootstrap)
    if pid is None:
        pytest.skip("the broker at %s was not started by this run; not pausing it" % kafka.bootstrap)
    outage = float(os.environ.get("MCDC_BROKER_OUTAGE_S", "60"))
    sim = users_sim
    prefix = "outage%d" % int(time.time())
    cfg = write_config(tmp_workdir, sim.uri, kafka={"bootstrap.servers": kafka.bootstrap},
                       **{"topic.prefix": prefix, "snapshot.mode": "no_data"})
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir, d)
    c = sim.client()
    n, peak_rss = 0, 0
    for i in range(50):
        c.itdb.outage.insert_one({"_id": n, "pad": "x" * 500}); n += 1
    os.kill(pid, signal.SIGSTOP)
    try:
        t_end = time.monotonic() + outage
        while time.monotonic() < t_end:
            for _ in range(20):
                c.itdb.outage.insert_one({"_id": n, "pad": "x" * 500}); n += 1
            rss = int(re.search(r"VmRSS:\s+(\d+)", Path("/proc/%d/status" % d.proc.pid)
                                .read_text()).group(1))
            peak_rss = max(peak_rss, rss)
            assert d.running(), log_text(tmp_workdir)[-2000:]
            time.sleep(0.5)
    finally:
        os.kill(pid, signal.SIGCONT)
    for _ in range(50):
        c.itdb.outage.insert_one({"_id": n, "pad": "x" * 500}); n += 1
    topic = "%s.itdb.outage" % prefix

    def all_there():
        recs = read_topics(kafka.bootstrap, [topic], idle_s=2, timeout_s=30)
        got = set(json.loads(key_id_text(r)) for r in recs if r.op == "c")
        return got if len(got) >= n else None
    got = wait_until(all_there, 180, "every insert in Kafka after the outage", interval_s=2)
    assert got == set(range(n))
    assert peak_rss < 256 * 1024, "RSS grew to %d kB during the outage" % peak_rss
    print("\nbroker outage %.0fs: %d inserts, all delivered; peak RSS %d kB"
          % (outage, n, peak_rss))
    assert d.stop(timeout_s=60) == 0


def test_failed_delivery_restarts_from_committed_offsets(tmp_workdir, users_sim, kafka,
                                                         broker_pause_lock, start_mongocdc):
    """A record Kafka refuses for a reason that may pass (here: its
    message.timeout.ms expires while the broker is frozen) restarts the task
    from the committed offsets instead of stopping it; every change still
    reaches the topic, in order per key (design.md §3, at-least-once)."""
    if kafka.is_mock:
        pytest.skip("needs the real local broker (the mock cluster cannot be paused from here)")
    pid = _kafka_local_pid(kafka.bootstrap)
    if pid is None:
        pytest.skip("the broker at %s was not started by this run; not pausing it" % kafka.bootstrap)
    sim = users_sim
    prefix = "redeliver%d" % int(time.time())
    cfg = write_config(tmp_workdir, sim.uri,
                       kafka={"bootstrap.servers": kafka.bootstrap, "message.timeout.ms": 2000},
                       **{"topic.prefix": prefix, "snapshot.mode": "no_data",
                          "connect.backoff.initial.delay.ms": 200})
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir, d)
    c = sim.client()
    n = 0
    for _ in range(20):
        c.itdb.redeliver.insert_one({"_id": n}); n += 1
    topic = "%s.itdb.redeliver" % prefix
    wait_until(lambda: len(read_topics(kafka.bootstrap, [topic], idle_s=1, timeout_s=20)) >= 20,
               60, "the first records before the outage", interval_s=1)
    os.kill(pid, signal.SIGSTOP)
    try:
        for _ in range(30):
            c.itdb.redeliver.insert_one({"_id": n}); n += 1
            time.sleep(0.1)
        wait_until(lambda: "restarting capture of" in log_text(tmp_workdir), 60,
                   "the task to restart after a failed delivery", interval_s=0.5)
    finally:
        os.kill(pid, signal.SIGCONT)
    for _ in range(20):
        c.itdb.redeliver.insert_one({"_id": n}); n += 1

    def all_there():
        recs = read_topics(kafka.bootstrap, [topic], idle_s=2, timeout_s=30)
        ids = [json.loads(key_id_text(r)) for r in recs if r.op == "c"]
        return ids if set(ids) >= set(range(n)) else None
    ids = wait_until(all_there, 180, "every insert in Kafka after the restart", interval_s=2)
    # in order per key: each id's first appearance comes in insertion order
    firsts = []
    for i in ids:
        if i not in firsts:
            firsts.append(i)
    assert firsts == list(range(n))
    assert d.running(), log_text(tmp_workdir)[-2000:]
    assert d.stop(timeout_s=60) == 0


def test_record_too_large_stops_with_key_and_size(tmp_workdir, users_sim, kafka, run_mongocdc):
    sim = users_sim
    prefix = "big%d" % int(time.time())
    c = sim.client()
    with c.start_session() as s:
        c.itdb.big.insert_one({"_id": "small"}, session=s)
        ot = s.operation_time
    cfg = write_config(tmp_workdir, sim.uri, kafka={"bootstrap.servers": kafka.bootstrap},
                       **{"topic.prefix": prefix, "snapshot.mode": "no_data",
                          "capture.start.op.time": (ot.time << 32) | ot.inc})
    # a document over the producer's message.max.bytes (1 MB by default)
    c.itdb.big.insert_one({"_id": "huge-doc", "blob": "x" * (1536 * 1024)})
    r = run_mongocdc("-c", cfg, timeout_s=90)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1, err[-2000:]
    assert "huge-doc" in err and re.search(r"\d{7} bytes", err), err[-2000:]
    # nothing was skipped: the stored position is before the huge document
    off = offsets_value(tmp_workdir)
    if off:
        v = json.loads(off)
        v = v[next(iter(v))]
        assert "huge-doc" not in off


@pytest.mark.parametrize("mode,code", [("initial", 136), ("when_needed", 286), ("never", 136)])
def test_history_lost_on_an_open_stream(tmp_workdir, users_sim, start_mongocdc, mode, code):
    """The open cursor's position is overwritten (136 CappedPositionLost on
    getMore) or a resume finds the history gone (286): never skipped."""
    sim = users_sim
    cfg = write_config(tmp_workdir, sim.uri, **{"snapshot.mode": mode})
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir, d)
    msg = {136: "Executor error during getMore :: caused by :: CollectionScan died due to "
                "position in capped collection being deleted. Last seen record id: RecordId(1)",
           286: "Resume of change stream was not possible, as the resume point may no longer "
                "be in the oplog."}[code]
    sim.control("fail", commands=["getMore"], code=code, errmsg=msg, times=1,
                errorLabels=["NonResumableChangeStreamError"] if code == 286 else [])
    c = sim.client()
    c.itdb.hl.insert_one({"_id": 1})
    if mode == "never":
        wait_until(lambda: not d.running(), 30, "mongocdc to stop")
        assert d.proc.returncode == 1
        assert "no longer in the oplog" in log_text(tmp_workdir)
        return
    wait_until(lambda: log_text(tmp_workdir).count("snapshot complete") >= 2, 30, "re-snapshot")
    assert re.search(r"WARN .*history lost", log_text(tmp_workdir))
    c.itdb.hl.insert_one({"_id": 2})
    wait_until(lambda: 2 in ids(streamed(tmp_workdir / "events.jsonl")), 30, "streaming again")
    recs = data_records(read_jsonl(tmp_workdir / "events.jsonl"), PREFIX)
    assert 1 in ids([r for r in recs if r.topic == PREFIX + ".itdb.hl"])  # as c or as r
    assert d.stop(timeout_s=30) == 0


# Port blocks handed out by _free_port_block, each with its lock held until this
# process ends.
_reserved_ports = []


def _free_port_block(n):
    """A base port such that base .. base+n are free on 127.0.0.1 (n servers and
    the simulator's control port). The ports must stay unbound until the test
    binds them itself (a daemon started before MongoDB), so a bind check alone
    is not a reservation: another test run on the same machine could pick the
    same block meanwhile and then the simulator finds it in use, or a daemon
    talks to the other run's servers. A block is therefore taken under an
    exclusive lock file kept for the life of this process, which every run
    honours; ports the kernel hands out itself are above 32767, out of this
    range."""
    import fcntl
    import tempfile
    lock_dir = Path(tempfile.gettempdir()) / "mongocdc-test-ports"
    lock_dir.mkdir(exist_ok=True)
    for base in range(23000, 30000, 10):
        fh = open(lock_dir / ("%d.lock" % base), "a")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.close()
            continue
        ok = True
        for p in range(base, base + n + 1):
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", p))
            except OSError:
                ok = False
            finally:
                s.close()
        if ok:
            _reserved_ports.append(fh)
            return base
        fh.close()
    raise RuntimeError("no free ports")


def test_started_before_mongodb_is_up(tmp_workdir, start_mongocdc):
    """The first probe fails: the task discovers the replica set itself once
    the servers answer, backing off meanwhile."""
    base = _free_port_block(3)
    uri = "mongodb://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d/?replicaSet=rs0" % (base, base + 1,
                                                                                base + 2)
    cfg = write_config(tmp_workdir, uri, **{"mongodb.server.selection.timeout.ms": 1000,
                                            "connect.backoff.initial.delay.ms": 300})
    d = start_mongocdc("-c", cfg)
    wait_until(lambda: "reconnecting in" in log_text(tmp_workdir), 30, "a reconnect")
    sim = Sim(tmp_workdir, (), extra=("--base-port", str(base)))
    try:
        wait_streaming(tmp_workdir)
        sim.client().itdb.late.insert_one({"_id": 1})
        wait_until(lambda: ids(streamed(tmp_workdir / "events.jsonl")) == [1], 30, "the insert")
        assert "[rs0]" in log_text(tmp_workdir)
        assert d.stop(timeout_s=30) == 0
    finally:
        sim.stop()


def test_offsets_in_kafka_resume_after_restart(tmp_workdir, users_sim, kafka, start_mongocdc):
    sim = users_sim
    prefix = "koff%d" % int(time.time())
    cfg = write_config(tmp_workdir, sim.uri, kafka={"bootstrap.servers": kafka.bootstrap},
                       **{"topic.prefix": prefix, "offsets.storage": "kafka",
                          "offsets.topic": "mongocdc-offsets-" + prefix})
    topics = [prefix + ".itdb.koff", prefix + ".sample_mflix.users"]

    def records():
        return read_topics(kafka.bootstrap, topics, idle_s=1.5, timeout_s=30)
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir)
    c = sim.client()
    c.itdb.koff.insert_one({"_id": 1})
    wait_until(lambda: [r.op for r in records() if r.topic == topics[0]] == ["c"], 60, "run 1")
    assert d.stop(timeout_s=30) == 0
    c.itdb.koff.insert_one({"_id": 2})
    d = start_mongocdc("-c", cfg)
    wait_until(lambda: len([r for r in records() if r.topic == topics[0]]) >= 2, 60, "run 2")
    recs = records()
    assert [json.loads(key_id_text(r)) for r in recs if r.topic == topics[0]] == [1, 2]
    assert len([r for r in recs if r.topic == topics[1]]) == 185, \
        "the snapshot was redone: offsets in Kafka were not found again"
    assert "snapshot" not in log_text(tmp_workdir)
    assert d.stop(timeout_s=30) == 0


def test_gives_up_after_connect_max_attempts(tmp_workdir, run_mongocdc):
    base = _free_port_block(1)
    cfg = write_config(tmp_workdir, "mongodb://127.0.0.1:%d/?replicaSet=rs0" % base,
                       **{"mongodb.server.selection.timeout.ms": 500,
                          "connect.backoff.initial.delay.ms": 100,
                          "connect.backoff.max.delay.ms": 400,
                          "connect.max.attempts": 4})
    r = run_mongocdc("-c", cfg, timeout_s=60)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1, err[-2000:]
    assert re.search(r"after 4 failed attempts", err), err[-2000:]
    delays = [int(x) for x in re.findall(r"reconnecting in (\d+) ms", err)]
    assert delays == [100, 200, 400], delays


def test_sigterm_while_mongodb_is_unreachable_is_bounded(tmp_workdir, shared_dir, start_mongocdc):
    """The simulator dies mid-stream: the task is inside server selection
    (mongodb.server.selection.timeout.ms is long) when SIGTERM comes, and
    still stops within a slice, with exit 0 and the offsets written."""
    sim = Sim(tmp_workdir, dataset_loads(shared_dir, only={"sample_mflix.users"}))
    try:
        cfg = write_config(tmp_workdir, sim.uri, **{"mongodb.server.selection.timeout.ms": 60000,
                                                    "cursor.max.await.time.ms": 1000,
                                                    "offsets.flush.timeout.ms": 2000,
                                                    "offsets.flush.interval.ms": 200})
        d = start_mongocdc("-c", cfg)
        wait_streaming(tmp_workdir, d)
        sim.client().itdb.gone.insert_one({"_id": "last"})
        wait_until(lambda: ids(streamed(tmp_workdir / "events.jsonl")) == ["last"], 30, "the insert")
    finally:
        sim.stop()
    # let the task run into selection against the dead servers
    time.sleep(4)
    assert d.running(), log_text(tmp_workdir)[-2000:]
    t0 = time.monotonic()
    rc = d.stop(timeout_s=30)
    took = time.monotonic() - t0
    assert rc == 0, log_text(tmp_workdir)[-2000:]
    assert took <= 10.0, "shutdown took %.2fs" % took
    off = offsets_value(tmp_workdir)
    assert off and "resume_token" in off, "no final offsets"
    print("\nSIGTERM with MongoDB unreachable: exit 0 after %.2fs" % took)


@pytest.mark.parametrize("mode", ["when_needed", "never"])
def test_recreated_replica_set_follows_snapshot_mode(tmp_workdir, shared_dir, start_mongocdc,
                                                     run_mongocdc, mode):
    """The stored resume token is not in a new replica set's oplog (280 "the
    resume token was not found"): handled as history lost by snapshot.mode."""
    sim = Sim(tmp_workdir, ())
    try:
        cfg = write_config(tmp_workdir, sim.uri, name="run1.yaml",
                           sink_path=tmp_workdir / "run1.jsonl", **{"snapshot.mode": mode})
        d = start_mongocdc("-c", cfg)
        wait_streaming(tmp_workdir, d)
        sim.client().itdb.wiped.insert_one({"_id": "old"})
        wait_until(lambda: ids(streamed(tmp_workdir / "run1.jsonl")) == ["old"], 30, "run 1")
        assert d.stop(timeout_s=30) == 0
    finally:
        sim.stop()
    assert "resume_token" in offsets_value(tmp_workdir)
    time.sleep(1.1)  # the new set's first events are later than the stored token
    sim2 = Sim(tmp_workdir, ())
    try:
        c = sim2.client()
        for i in range(3):
            c.itdb.wiped.insert_one({"_id": "new%d" % i})
        cfg2 = write_config(tmp_workdir, sim2.uri, name="run2.yaml",
                            sink_path=tmp_workdir / "run2.jsonl", **{"snapshot.mode": mode})
        if mode == "never":
            r = run_mongocdc("-c", cfg2, timeout_s=60)
            err = r.stderr.decode(errors="replace")
            assert r.returncode == 1, err[-2000:]
            assert "wiped or re-created" in err and "move the offsets file away" in err, \
                err[-2000:]
            assert not read_jsonl(tmp_workdir / "run2.jsonl")
        else:
            d2 = start_mongocdc("-c", cfg2)
            wait_until(lambda: "snapshot complete" in log_text(tmp_workdir), 60, "re-snapshot")
            assert re.search(r"WARN .*does not exist in this replica set's oplog",
                             log_text(tmp_workdir)), log_text(tmp_workdir)[-2000:]
            reads = set(ids([r for r in data_records(read_jsonl(tmp_workdir / "run2.jsonl"),
                                                     PREFIX) if r.op == "r"]))
            assert {"new0", "new1", "new2"} <= reads
            assert d2.stop(timeout_s=30) == 0
    finally:
        sim2.stop()


def test_kafka_down_for_the_whole_run_is_not_a_clean_stop(tmp_workdir, users_sim, start_mongocdc):
    """No broker ever answers: a WARN once records have waited 10 s, and on
    SIGTERM exit 1 saying the records are pending (sent again on restart)."""
    sim = users_sim
    port = _free_port_block(1)
    cfg = write_config(tmp_workdir, sim.uri, kafka={"bootstrap.servers": "127.0.0.1:%d" % port},
                       **{"snapshot.mode": "no_data", "offsets.flush.timeout.ms": 1000})
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir, d)
    sim.client().itdb.nokafka.insert_one({"_id": 1})
    wait_until(lambda: "for acknowledgement by Kafka" in log_text(tmp_workdir), 30,
               "the stalled-acknowledgement WARN")
    rc = d.stop(timeout_s=30)
    log = log_text(tmp_workdir)
    assert rc == 1, log[-2000:]
    assert re.search(r"stopped with \d+ records not acknowledged by Kafka; they will be sent "
                     r"again on restart", log), log[-2000:]
    assert "stopped cleanly" not in log
    assert len(re.findall(r"WARN .*for acknowledgement by Kafka", log)) == 1
