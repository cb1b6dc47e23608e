"""Exactly-once delivery (exactly.once.support): every change reaches a
read_committed consumer exactly once, through clean restarts, SIGKILLs at any
moment and a second instance started by mistake; the records of aborted
transactions are really in the topics (read_uncommitted sees them) and really
hidden. Runs on the real broker of the suite (transactions need one: the mock
cluster is skipped)."""

import json
import os
import random
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import SOURCE_DIR, Daemon, wait_until
from test_metrics import get, metrics_port, promtool_ok, samples
from pipeline_support import (Sim, dataset_docs, dataset_loads, expected_key, key_id_text,
                              log_text, read_topics, wait_log, write_config)


@pytest.fixture
def broker(kafka):
    if kafka.is_mock:
        pytest.skip("transactions need a real broker")
    return kafka


def eos_config(workdir, sim, broker, prefix, name="cfg.yaml", **more):
    opts = {"topic.prefix": prefix, "offsets.storage": "kafka",
            "offsets.topic": prefix + "-offsets", "exactly.once.support": "required",
            "snapshot.max.threads": 2}
    opts.update(more)
    return write_config(workdir, sim.uri, name=name, kafka={"bootstrap.servers": broker.bootstrap},
                        raw=opts)


class Writer(threading.Thread):
    """Inserts, updates ($set v = next version) and deletes documents of
    eos.docs, remembering every version (as test_crash.py's writer)."""

    def __init__(self, client, pause=(0.003, 0.02), seed=7):
        super().__init__(daemon=True)
        self.client = client
        self.pause = pause
        self.rnd = random.Random(seed)
        self.stop_flag = threading.Event()
        self.live = {}
        self.history = []  # (_id, version or "d")
        self.errors = []
        self.next_id = 0

    def step(self):
        coll = self.client.eos.docs
        r = self.rnd.random()
        if r < 0.4 or len(self.live) < 5:
            k = "k%05d" % self.next_id
            self.next_id += 1
            coll.insert_one({"_id": k, "v": 0, "pad": "x" * self.rnd.randint(10, 200)})
            self.live[k] = 0
            self.history.append((k, 0))
        elif r < 0.85:
            k = self.rnd.choice(sorted(self.live))
            self.live[k] += 1
            coll.update_one({"_id": k}, {"$set": {"v": self.live[k]}})
            self.history.append((k, self.live[k]))
        else:
            k = self.rnd.choice(sorted(self.live))
            coll.delete_one({"_id": k})
            del self.live[k]
            self.history.append((k, "d"))

    def run(self):
        while not self.stop_flag.is_set():
            try:
                self.step()
            except Exception as e:  # the simulator is never faulted here
                self.errors.append(repr(e))
                time.sleep(0.1)
            time.sleep(self.rnd.uniform(*self.pause))


def change_counts(recs, topic):
    """(_id, version) -> how many records of topic carry that change."""
    seen = {}
    for r in recs:
        if r.topic != topic or r.op not in ("c", "u", "d"):
            continue
        k = json.loads(key_id_text(r))
        if r.op == "c":
            v = 0
        elif r.op == "u":
            uf = r.updated_fields()
            v = uf.get("v") if uf else r.after()["v"]
        else:
            v = "d"
        seen[(k, v)] = seen.get((k, v), 0) + 1
    return seen


def assert_exactly_once(recs, topic, writer, what):
    seen = change_counts(recs, topic)
    missing = [h for h in writer.history if h not in seen]
    dups = {k: n for k, n in seen.items() if n > 1}
    assert not missing, "%s: changes missing: %s" % (what, missing[:10])
    assert not dups, "%s: changes seen more than once: %s" % (what, list(dups.items())[:10])
    return seen


@pytest.mark.parametrize("mode", ["change_streams", "oplog"])
def test_exactly_once_restart_stream(tmp_workdir, shared_dir, broker, start_mongocdc, mode):
    """Snapshot, streaming, a clean restart, in both capture modes: each
    change once for read_committed; the offset is in the offsets topic,
    committed with the records."""
    prefix = "eos%d" % time.time_ns()
    sim = Sim(tmp_workdir, dataset_loads(shared_dir, only={"sample_mflix.users"}))
    try:
        cfg = eos_config(tmp_workdir, sim, broker, prefix,
                         **{"capture.mode": mode, "metrics.enabled": True, "metrics.http.port": 0,
                            "heartbeat.interval.ms": 300, "provide.transaction.metadata": True})
        client = sim.client()
        w = Writer(client)
        for _ in range(30):
            w.step()
        started = "tailing local.oplog.rs" if mode == "oplog" else "streaming changes from"
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, started, daemon=d)
        assert "exactly-once delivery: transactional id %s-rs0" % prefix in log_text(tmp_workdir)
        for _ in range(200):
            w.step()
        time.sleep(1.5)
        assert d.stop() == 0
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, started, daemon=d)
        for _ in range(200):
            w.step()
        with client.start_session() as s:  # a MongoDB transaction: BEGIN and END records
            with s.start_transaction():
                client.eos.txn.insert_one({"_id": 1}, session=s)
                client.eos.txn.insert_one({"_id": 2}, session=s)
        w.step()  # the next change closes it (END)
        time.sleep(1.5)
        body = get(metrics_port(tmp_workdir, d), "/metrics")[1]
        promtool_ok(body)
        s = samples(body)
        committed = s['mongocdc_transactions_committed_total{task="rs0"}']
        assert committed >= 2, body
        assert s['mongocdc_transactions_aborted_total{task="rs0"}'] == 0
        assert s['mongocdc_transaction_commit_latency_seconds_count{task="rs0"}'] == committed
        assert d.stop() == 0
        topic = "%s.eos.docs" % prefix
        users = "%s.sample_mflix.users" % prefix
        meta = read_topics(broker.bootstrap, ["%s.transaction" % prefix,
                                              "__debezium-heartbeat.%s" % prefix], idle_s=3)
        marks = [r.value["status"] for r in meta if r.topic == "%s.transaction" % prefix]
        assert marks == ["BEGIN", "END"], marks
        assert any(r.topic.startswith("__debezium-heartbeat") for r in meta), "no heartbeat"
        recs = read_topics(broker.bootstrap, [topic, users], idle_s=3)
        # the first 30 changes were before the snapshot: read as r records
        snap = {json.loads(key_id_text(r)) for r in recs if r.topic == topic and r.op == "r"}
        later = [h for h in w.history[30:]]
        w.history = later
        seen = assert_exactly_once(recs, topic, w, "committed")
        assert snap and len(seen) == len(later)
        want = {expected_key(doc["_id"]) for doc in
                dataset_docs(dataset_loads(shared_dir, only={"sample_mflix.users"})[0][0])}
        rows = [r.key for r in recs if r.topic == users and r.op == "r"]
        assert sorted(rows) == sorted(want), "each users document once as r"
        client.close()
    finally:
        sim.stop()


KILLS = int(os.environ.get("MCDC_EOS_KILLS", "14"))


def test_exactly_once_sigkill_loop(tmp_workdir, shared_dir, broker, start_mongocdc):
    """SIGKILLs during the initial snapshot, streaming and an incremental
    snapshot's windows while a writer makes changes: a read_committed
    consumer sees every change exactly once and every document exactly once
    per snapshot; a read_uncommitted consumer sees the aborted transactions'
    records too (they are really in the topics, and really hidden)."""
    prefix = "eosk%d" % time.time_ns()
    loads = dataset_loads(shared_dir)
    sim = Sim(tmp_workdir, loads)
    daemons = []
    try:
        cfg = eos_config(tmp_workdir, sim, broker, prefix,
                         **{"signal.data.collection": "sigdb.signals",
                            "incremental.snapshot.chunk.size": 40,
                            "max.batch.size": 100,
                            "snapshot.fetch.size": 200})
        client = sim.client()
        writer = Writer(client, pause=(0.005, 0.03))
        rnd = random.Random(11)
        kills = in_snapshot = in_incremental = 0
        signalled = False
        t0 = time.monotonic()
        while kills < KILLS and time.monotonic() - t0 < 150:
            d = start_mongocdc("-c", cfg)
            daemons.append(d)
            if kills < 3:
                wait_until(lambda: "initial snapshot starting" in log_text(tmp_workdir), 60,
                           "the snapshot to start")
                time.sleep(rnd.uniform(0.05, 0.4))
            else:
                if not writer.is_alive() and not writer.history:
                    wait_log(tmp_workdir, "streaming changes from", daemon=d)
                    writer.start()
                if kills == 6 and not signalled:
                    wait_log(tmp_workdir, "streaming changes from", daemon=d)
                    client.sigdb.signals.insert_one({"_id": "eos-inc", "type": "execute-snapshot",
                                                     "data": {"data-collections":
                                                              ["sample_mflix\\.users"]}})
                    signalled = True
                time.sleep(rnd.uniform(0.8, 2.5))
            assert d.running(), "mongocdc exited by itself: %s" % log_text(tmp_workdir)[-3000:]
            run_log = log_text(tmp_workdir)
            in_snapshot += ("initial snapshot starting" in run_log
                            and "snapshot complete" not in run_log)
            in_incremental += signalled and "window" in run_log.split("streaming changes")[-1]
            d.proc.kill()
            d.proc.wait(timeout=10)
            kills += 1
            os.rename(tmp_workdir / "mongocdc.stderr", tmp_workdir / ("run%02d.log" % kills))
        writer.stop_flag.set()
        writer.join(timeout=10)
        assert not writer.errors, writer.errors[:3]

        d = start_mongocdc("-c", cfg)
        daemons.append(d)
        wait_log(tmp_workdir, "streaming changes from", daemon=d)
        wait_until(lambda: "incremental snapshot (signal eos-inc) completed" in
                   "".join(p.read_text(errors="replace") for p in tmp_workdir.glob("run*.log"))
                   + log_text(tmp_workdir), 120, "the incremental snapshot to complete")
        time.sleep(2)
        assert d.stop(timeout_s=30) == 0

        topic = "%s.eos.docs" % prefix
        topics = [topic] + ["%s.%s" % (prefix, ns) for _, ns in loads]
        committed = read_topics(broker.bootstrap, topics, idle_s=5, timeout_s=120)
        seen = assert_exactly_once(committed, topic, writer, "read_committed")
        final = {d_["_id"]: d_["v"] for d_ in client.eos.docs.find({}, {"v": 1})}
        assert final == writer.live
        # every dataset document once in the initial snapshot; users once more
        # in the incremental one
        for path, ns in loads:
            want = sorted(expected_key(doc["_id"]) for doc in dataset_docs(path))
            rows = sorted(r.key for r in committed
                          if r.topic == "%s.%s" % (prefix, ns) and r.op == "r")
            times = 2 if ns == "sample_mflix.users" else 1
            assert rows == sorted(want * times), "%s: r records not exactly %d per document" % (
                ns, times)

        uncommitted = read_topics(broker.bootstrap, [topic], idle_s=5, timeout_s=120,
                                  isolation="read_uncommitted")
        raw = change_counts(uncommitted, topic)
        aborted = sum(raw.values()) - sum(seen.values())
        assert aborted > 0, "no aborted record in the topic: the kills hit no open transaction"
        print("\nEXACTLY-ONCE SIGKILL LOOP: %d kills (%d in the initial snapshot, %d with "
              "incremental windows), %d changes, each once for read_committed; %d records of "
              "aborted transactions seen by read_uncommitted only" % (
                  kills, in_snapshot, in_incremental, len(writer.history), aborted))
        assert in_snapshot >= 1
        client.close()
    finally:
        for d in daemons:
            if d.running():
                d.proc.kill()
        sim.stop()


def test_exactly_once_zombie_is_fenced(tmp_workdir, shared_dir, broker):
    """A first instance frozen (SIGSTOP), a second started on the same
    configuration, the first resumed (SIGCONT): the first is fenced, exits 1
    saying another instance holds the task, and read_committed consumers see
    no change twice."""
    prefix = "eosz%d" % time.time_ns()
    sim = Sim(tmp_workdir, ())
    a = b = None
    try:
        client = sim.client()
        writer = Writer(client, pause=(0.01, 0.03))
        for _ in range(5):
            writer.step()
        cfg = eos_config(tmp_workdir, sim, broker, prefix,
                         **{"transaction.boundary": "interval",
                            "transaction.boundary.interval.ms": 500})
        wa, wb = tmp_workdir / "a", tmp_workdir / "b"
        wa.mkdir()
        wb.mkdir()
        a = Daemon([os.environ["MCDC_BIN"], "-c", cfg], wa)
        wait_log(wa, "streaming changes from", daemon=a)
        writer.start()
        time.sleep(1.5)
        a.proc.send_signal(signal.SIGSTOP)
        b = Daemon([os.environ["MCDC_BIN"], "-c", cfg], wb)
        wait_log(wb, "streaming changes from", daemon=b)
        time.sleep(2)
        a.proc.send_signal(signal.SIGCONT)
        assert a.proc.wait(timeout=60) == 1
        text = log_text(wa)
        assert re.search(r"ERROR.*another instance holds this task: transactional id %s-rs0"
                         % prefix, text), text[-2000:]
        time.sleep(1.5)
        writer.stop_flag.set()
        writer.join(timeout=10)
        time.sleep(1.5)
        assert b.running()
        assert b.stop() == 0
        topic = "%s.eos.docs" % prefix
        recs = read_topics(broker.bootstrap, [topic], idle_s=4)
        writer.history = writer.history[5:]
        assert_exactly_once(recs, topic, writer, "read_committed")
        client.close()
    finally:
        for d in (a, b):
            if d is not None and d.running():
                d.proc.send_signal(signal.SIGCONT)
                d.proc.kill()
        sim.stop()


@pytest.mark.parametrize("connection", ["replica_set", "sharded"])
def test_exactly_once_sharded_with_chunk_moves(tmp_workdir, broker, start_mongocdc, connection):
    """Per-shard tasks (one transactional producer each), or one stream
    through mongos, while chunks move and the daemon is SIGKILLed:
    read_committed sees every update once and in order per document, and
    every document once in the snapshot."""
    from conftest import start_sharded_sim
    from test_sharded import SHARDED, populate, update_and_move_chunks
    prefix = "eoss%d" % time.time_ns()
    sim = start_sharded_sim()
    daemons = []
    try:
        c = populate(sim)
        cfg = write_config(tmp_workdir, sim.uri, kafka={"bootstrap.servers": broker.bootstrap},
                           raw={"topic.prefix": prefix, "offsets.storage": "kafka",
                                "offsets.topic": prefix + "-offsets",
                                "exactly.once.support": "required", "max.batch.size": 50,
                                "mongodb.connection.mode": connection})
        tasks = 2 if connection == "replica_set" else 1
        written = []
        stop = threading.Event()
        t = threading.Thread(target=update_and_move_chunks, args=(sim, written, stop),
                             daemon=True)
        for k in range(int(os.environ.get("MCDC_EOS_SHARD_RUNS", "4"))):
            d = start_mongocdc("-c", cfg)
            daemons.append(d)
            if k == 0:
                wait_log(tmp_workdir, "initial snapshot starting", 60, d)
                time.sleep(0.05)
            else:
                wait_log(tmp_workdir, "streaming changes from", 60, d, n=tasks)
                if k == 1:
                    t.start()
                time.sleep(random.uniform(0.5, 2.0))
            assert d.running(), log_text(tmp_workdir)[-3000:]
            d.proc.kill()
            d.proc.wait(timeout=10)
            os.rename(tmp_workdir / "mongocdc.stderr", tmp_workdir / ("run%d.log" % k))
        d = start_mongocdc("-c", cfg)
        daemons.append(d)
        wait_log(tmp_workdir, "streaming changes from", 60, d, n=tasks)
        if not t.is_alive():
            t.start()
        time.sleep(float(os.environ.get("MCDC_EOS_SHARD_LAST_S", "0")))
        stop.set()
        t.join(timeout=30)
        time.sleep(3)
        assert d.stop(timeout_s=30) == 0
        for shard in ("shard01", "shard02") if tasks == 2 else ():
            assert "transactional id %s-%s" % (prefix, shard) in log_text(tmp_workdir)
        recs = read_topics(broker.bootstrap, ["%s.shop.orders" % prefix], idle_s=4)
        vals = {}
        per_doc = {}
        rows = []
        for r in recs:
            k = json.loads(key_id_text(r))
            if r.op == "r":
                rows.append(k)
            elif r.op == "u":
                v = r.updated_fields()["v"]
                vals[v] = vals.get(v, 0) + 1
                per_doc.setdefault(k, []).append((v, r.payload["source"].get("rs")))
        missing = sorted(set(written) - set(vals))
        dups = sorted(v for v, n in vals.items() if n > 1)
        assert not missing, "updates lost: %s" % missing[:10]
        assert not dups, "updates seen twice: %s" % dups[:10]
        unordered = {k: seq for k, seq in per_doc.items() if seq != sorted(seq)}
        assert not unordered, "per-document order broken: %s" % list(unordered.items())[:5]
        assert sorted(rows) == list(range(SHARDED)), "snapshot rows not exactly once"
        print("\nEXACTLY-ONCE %s: %d updates with chunk moves and SIGKILLs, each once and in "
              "order per document" % (connection, len(written)))
        c.close()
    finally:
        for d in daemons:
            if d.running():
                d.proc.kill()
        sim.stop()


def local_broker_dir(bootstrap):
    """KAFKA_LOCAL_DIR when scripts/kafka-local.sh runs the broker at bootstrap there."""
    d = os.environ.get("KAFKA_LOCAL_DIR")
    if not d or not (Path(d) / "kafka.pid").is_file():
        return None
    b = Path(d) / "bootstrap"
    return d if b.is_file() and b.read_text().strip() == bootstrap else None


@pytest.mark.broker_outage
def test_exactly_once_broker_restart_mid_transaction(tmp_workdir, broker, start_mongocdc):
    """The broker crashes (SIGKILL) and comes back while transactions are
    open and changes keep coming: the daemon waits, aborts or commits as the
    broker answers, never exits, and read_committed sees each change once."""
    import kafka_support
    bdir = local_broker_dir(broker.bootstrap)
    if bdir is None:
        pytest.skip("the broker at %s was not started by scripts/kafka-local.sh here"
                    % broker.bootstrap)
    prefix = "eosb%d" % time.time_ns()
    sim = Sim(tmp_workdir, ())
    try:
        client = sim.client()
        writer = Writer(client, pause=(0.005, 0.02))
        cfg = eos_config(tmp_workdir, sim, broker, prefix,
                         **{"transaction.boundary": "interval",
                            "transaction.boundary.interval.ms": 1000})
        with kafka_support.broker_outage_lock(broker.bootstrap, exclusive=True):
            d = start_mongocdc("-c", cfg)
            wait_log(tmp_workdir, "streaming changes from", daemon=d)
            writer.start()
            time.sleep(2.5)
            before = len(writer.history)
            out = subprocess.run([str(SOURCE_DIR / "scripts" / "kafka-local.sh"), "restart"],
                                 env={**os.environ, "KAFKA_LOCAL_DIR": bdir},
                                 capture_output=True, text=True, timeout=180)
            assert out.returncode == 0, out.stdout + out.stderr
            during = len(writer.history) - before
            time.sleep(5)
            writer.stop_flag.set()
            writer.join(timeout=10)
            assert not writer.errors, writer.errors[:3]
            topic = "%s.eos.docs" % prefix

            def complete():
                recs = read_topics(broker.bootstrap, [topic], idle_s=3, timeout_s=60)
                return recs if all(h in change_counts(recs, topic) for h in writer.history) \
                    else None
            recs = wait_until(complete, 120, "every change committed after the broker restart",
                              interval_s=2)
            assert d.running(), log_text(tmp_workdir)[-3000:]
            assert d.stop(timeout_s=60) == 0
        assert_exactly_once(recs, topic, writer, "read_committed after the broker restart")
        print("\nEXACTLY-ONCE BROKER RESTART: %d changes (%d while the broker was down), each "
              "once" % (len(writer.history), during))
        client.close()
    finally:
        sim.stop()


def test_exactly_once_check_tries_transactions(tmp_workdir, broker, users_sim, run_mongocdc):
    """mongocdc check: with exactly.once.support, the broker is asked for a
    transactional producer (under <name>-check, so no task is fenced)."""
    prefix = "eosc%d" % time.time_ns()
    cfg = eos_config(tmp_workdir, users_sim, broker, prefix)
    r = run_mongocdc("check", "-c", cfg, timeout_s=90)
    out = r.stdout.decode()
    assert r.returncode == 0, out + r.stderr.decode()
    assert re.search(r"^PASS\s+kafka-transactions: the broker grants transactions "
                     r"\(init_transactions as %s-check\)" % prefix, out, re.M), out


def test_exactly_once_dead_letter_copy_in_the_transaction(tmp_workdir, broker, users_sim,
                                                          start_mongocdc):
    """A record the producer refuses for its size goes to the dead-letter
    topic inside the transaction: nothing aborts, read_committed sees the
    other records once and the copy once."""
    from kafka_support import create_topic
    prefix = "eosd%d" % time.time_ns()
    dlq = create_topic(broker, prefix + "-dlq")
    c = users_sim.client()
    with c.start_session() as s:
        c.itdb.dl.insert_one({"_id": "before"}, session=s)
        ot = s.operation_time
    cfg = write_config(tmp_workdir, users_sim.uri,
                       kafka={"bootstrap.servers": broker.bootstrap, "message.max.bytes": "4000"},
                       raw={"topic.prefix": prefix, "offsets.storage": "kafka",
                            "offsets.topic": prefix + "-offsets",
                            "exactly.once.support": "required", "snapshot.mode": "no_data",
                            "capture.start.op.time": (ot.time << 32) | ot.inc,
                            "errors.deadletterqueue.topic.name": prefix + "-dlq"})
    for k in ("a", "b"):
        c.itdb.dl.insert_one({"_id": k})
    c.itdb.dl.insert_one({"_id": "big", "blob": "x" * 6000})
    c.itdb.dl.insert_one({"_id": "c"})
    d = start_mongocdc("-c", cfg)
    topic = prefix + ".itdb.dl"

    def ids():
        recs = read_topics(broker.bootstrap, [topic], idle_s=2, timeout_s=30)
        got = [json.loads(key_id_text(r)) for r in recs if r.op in ("c", "r")]
        return got if "c" in got else None
    assert wait_until(ids, 90, "the records after the too-large one", interval_s=2) == \
        ["before", "a", "b", "c"]
    dl = read_topics(broker.bootstrap, [dlq], idle_s=2, timeout_s=30)
    assert [json.loads(key_id_text(r)) for r in dl] == ["big"]
    assert dict(dl[0].headers)["mongocdc.dlq.reason"] == "MSG_SIZE_TOO_LARGE"
    log = log_text(tmp_workdir)
    assert "was aborted" not in log, log[-2000:]
    assert d.stop(timeout_s=60) == 0
    c.close()


def test_exactly_once_transaction_timed_out_by_the_broker(tmp_workdir, broker, start_mongocdc):
    """The daemon frozen (SIGSTOP) with a transaction open for longer than
    its transaction.timeout.ms: the coordinator aborts the transaction and
    bumps the producer's epoch. Resumed, the daemon must not take that for
    another instance: it aborts, rewinds and goes on, each change once."""
    prefix = "eost%d" % time.time_ns()
    sim = Sim(tmp_workdir, ())
    try:
        client = sim.client()
        writer = Writer(client, pause=(0.01, 0.03))
        cfg = write_config(tmp_workdir, sim.uri,
                           kafka={"bootstrap.servers": broker.bootstrap,
                                  "transaction.timeout.ms": "3000"},
                           raw={"topic.prefix": prefix, "offsets.storage": "kafka",
                                "offsets.topic": prefix + "-offsets",
                                "exactly.once.support": "required",
                                "transaction.boundary": "interval",
                                "transaction.boundary.interval.ms": 2000})
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "streaming changes from", daemon=d)
        writer.start()
        time.sleep(1.0)
        d.proc.send_signal(signal.SIGSTOP)
        time.sleep(float(os.environ.get("MCDC_EOS_FREEZE_S", "16")))
        d.proc.send_signal(signal.SIGCONT)
        time.sleep(4)
        writer.stop_flag.set()
        writer.join(timeout=10)
        topic = "%s.eos.docs" % prefix

        def complete():
            recs = read_topics(broker.bootstrap, [topic], idle_s=3, timeout_s=60)
            return recs if all(h in change_counts(recs, topic) for h in writer.history) else None
        recs = wait_until(complete, 90, "every change committed after the freeze", interval_s=2)
        assert d.running(), log_text(tmp_workdir)[-3000:]
        assert d.stop(timeout_s=60) == 0
        assert_exactly_once(recs, topic, writer, "read_committed after a timed-out transaction")
        client.close()
    finally:
        sim.stop()
