#!/usr/bin/python3
"""wire_bench: the whole mongocdc process through the wire, with a server that
is not the bottleneck (issue "The daemon's own ceiling").

bench/replay_server (built with the tree) answers as a replica set, or as a
mongos with N one-member shards, and replays pre-built change events from the
datasets' documents (6 in 10 inserts, 3 updates with their updateLookup
document, 1 delete; every resume token and clusterTime unique and increasing)
and snapshot batches of the same documents. The real daemon binary runs
against it into a sink:
  mock   librdkafka's mock cluster, hosted in this process (the daemon's CPU
         figures do not include the broker's);
  kafka  a broker given with --kafka host:port (e.g. scripts/kafka-local.sh);
  file   the file sink (JSON lines in a temporary directory).

Runs, per task count (1, 2, 4; 2 and 4 are shards behind the replay mongos,
one capture task per shard):
  stream    snapshot.mode no_data; --events events per task; the clock runs
            from the daemon's start to the last record acknowledged;
  snapshot  snapshot.mode initial; --collections collections of --docs
            documents per task, read by snapshot.max.threads = --readers.
Figures: records/s (acknowledged, from the daemon's /metrics), the daemon's
CPU seconds (user+sys, /proc, whole process) per million records, its peak RSS
(VmHWM), and the replay server's CPU over the same time, which shows how far it
is from being the bound. Each run repeats --repeat times; min..max is printed
(from three repeats on, the median first: "med [min..max]"). Figures are
reported, never asserted: the machine is shared.

Bounds (stream mode, unless --no-bounds): after the stream runs, --repeat
times, e2e_bench replays the replay server's own change events
(replay_server --dump-events: one reply's events) from memory for --events
events: encode-only (event_from_change + encoder_encode), raw produce (the
pre-encoded records through the daemon's sink code into the same sink: the
same mock cluster, broker, or a file sink) and e2e_bench's in-memory end to
end; printed per record beside the daemon's figures.

Order gate (2+ tasks): each shard task logs at stop how many events the gate
checked and its added latency p50 / p99 per event, and how many events it
held and for how long; printed per run set. --chunks C makes the datasets'
namespaces sharded collections of C chunks, each shard replaying only its
own (so the gate looks every event up in a chunk map); --migrate moves the
first namespace's chunks from the first shard to the second at half the
stream; --slow-shard-ms D makes the first shard (the donor) lag by D ms per
getMore, so the recipient's events of the moved documents wait for it
(replay_chunks.c).

Exactly-once (--eos off,on): each setting runs in the same invocation, the
settings alternating within every repeat, so that on and off meet the same
machine load. With eos on the daemon runs with exactly.once.support required,
offsets.storage kafka and the transaction boundary of --boundary (poll, with
max.batch.size = --max-batch, or interval:MS; a comma list alternates too);
every run has a topic.prefix and offsets.topic of its own. Printed in
addition: transactions committed / aborted and the commit latency from the
histogram mongocdc_transaction_commit_latency_seconds: p50 / p99 estimated
by linear interpolation inside its buckets (bucket resolution: 1, 5, 10, 25,
50, 100, 250 ms, ...) and the exact mean (sum / count).

Latency (--latency, stream, --sink kafka or mock): the replay server paces
each task's change stream at --rate events per second while a
confluent_kafka consumer (isolation.level read_committed) assigned to the
run's topics beforehand reads them; per record, receive time minus the
record's Kafka CreateTime (set by the daemon's producer at produce, so it
includes everything after the daemon read the event: batching, the
transaction's commit, the broker and the consumer's fetch). Records created
in the first --warmup seconds are left out. p50 / p99 / max are printed.
(The event's source ts_ms cannot serve here: the replay server's clusterTime
seconds stay at the run's start.)

    bench/wire_bench.py [--sink mock|kafka|file] [--kafka HOST:PORT]
                        [--tasks 1,2,4] [--modes stream,snapshot]
                        [--events N] [--docs N] [--readers R] [--repeat R]
                        [--eos off,on] [--boundary poll|interval:MS[,...]]
                        [--max-batch N] [--precreate]
                        [--latency --rate N [--warmup S]] [--no-bounds]
                        [--chunks C [--migrate] [--slow-shard-ms D]]
                        [--set KEY=VALUE ...]
"""
import argparse
import glob
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_DATA = ["sample_analytics/accounts.json", "sample_analytics/customers.json",
                "sample_mflix/theaters.json", "sample_mflix/users.json", "classic/books.json",
                "classic/restaurant.json", "classic/grades.json", "classic/students.json"]
ACK_RE = re.compile(r"^mongocdc_records_acknowledged_total(?:\{[^}]*\})? (\d+)", re.M)
CLK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        v = f.read().rsplit(")", 1)[1].split()
    return (int(v[11]) + int(v[12])) / CLK


def peak_rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


GATE_RE = re.compile(r"order gate: (\d+) events checked, added latency p50 ([\d.]+) us, "
                     r"p99 ([\d.]+) us")
HELD_RE = re.compile(r"order gate: (\d+) events of documents moved from another shard were held, "
                     r"(\d+) ms in all")
BOUND_RE = re.compile(r"^(\S+)\s+(encode-only|raw-produce|end-to-end)\s+(\d+) events\s+(\d+) events/s"
                      r"\s+([\d.]+) CPU-s/M events(?:\s+(\d+)/(\d+) records)?", re.M)
TXN_RE = re.compile(r"^mongocdc_transactions_(committed|aborted)_total(?:\{[^}]*\})? (\d+)", re.M)
HIST = "mongocdc_transaction_commit_latency_seconds"
BUCKET_RE = re.compile(r"^%s_bucket\{[^}]*le=\"([^\"]+)\"\} (\d+)" % HIST, re.M)
HSUM_RE = re.compile(r"^%s_(sum|count)(?:\{[^}]*\})? ([0-9.e+-]+)" % HIST, re.M)


def metrics(port):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=2) as r:
            return r.read().decode()
    except OSError:
        return ""


def acked(port):
    return sum(int(m.group(1)) for m in ACK_RE.finditer(metrics(port)))


def quantile(buckets, q):
    """q-quantile of a cumulative histogram [(upper bound, count)], linear
    inside the bucket that holds it (as Prometheus' histogram_quantile);
    None when empty. Bucket resolution only."""
    total = buckets[-1][1] if buckets else 0
    if total == 0:
        return None
    rank, lo, below = q * total, 0.0, 0
    for le, cum in buckets:
        if cum >= rank:
            if le == float("inf"):
                return lo
            return lo + (le - lo) * (rank - below) / max(cum - below, 1)
        lo, below = le, cum
    return lo


def txn_figures(text):
    """Transactions committed / aborted, commit latency p50 / p99 (bucket
    resolution) and mean, seconds, summed over the tasks."""
    out = {"committed": 0, "aborted": 0}
    for m in TXN_RE.finditer(text):
        out[m.group(1)] += int(m.group(2))
    cum = {}
    for m in BUCKET_RE.finditer(text):
        le = float("inf") if m.group(1) == "+Inf" else float(m.group(1))
        cum[le] = cum.get(le, 0) + int(m.group(2))
    b = sorted(cum.items())
    out["p50"], out["p99"] = quantile(b, 0.5), quantile(b, 0.99)
    hs = {"sum": 0.0, "count": 0.0}
    for m in HSUM_RE.finditer(text):
        hs[m.group(1)] += float(m.group(2))
    out["mean"] = hs["sum"] / hs["count"] if hs["count"] else None
    return out


def topics_of(prefix, data, mode="stream", collections=0):
    """The topics the daemon writes to: a stream's, the datasets' namespaces
    ("<prefix>.<parent folder>.<file name without .json>", replay_data.c);
    a snapshot's, "<prefix>.bench.c<k>" (replay_server.c)."""
    if mode == "snapshot":
        return ["%s.bench.c%d" % (prefix, k) for k in range(collections)]
    return sorted({"%s.%s.%s" % (prefix, os.path.basename(os.path.dirname(d)),
                                 os.path.basename(d)[:-5] if d.endswith(".json") else os.path.basename(d))
                   for d in data})


def create_topics(bootstrap, topics, mock=None):
    """Creates the topics (one partition, replication 1) before the daemon
    runs, so that the first transaction does not wait for their creation.
    The mock cluster does not serve CreateTopics: there a metadata request
    of mock's producer creates each (auto-creation)."""
    from confluent_kafka.admin import AdminClient, NewTopic
    if mock is not None:
        for t in topics:
            mock.owner.list_topics(t, timeout=10)
        return
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    for f in admin.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
        try:
            f.result(30)
        except Exception as e:  # already there is fine
            if "TOPIC_ALREADY_EXISTS" not in str(e):
                raise


class Latency(object):
    """A read_committed consumer of the run's topics, created and assigned
    (from the beginning) before the daemon starts."""

    def __init__(self, bootstrap, topics, mock=None):
        from confluent_kafka import Consumer, TopicPartition, OFFSET_BEGINNING
        create_topics(bootstrap, topics, mock)
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wire-bench-%s" % uuid.uuid4().hex,
                           "isolation.level": "read_committed", "enable.auto.commit": False,
                           "fetch.wait.max.ms": 10, "log_level": 3})
        self.c.assign([TopicPartition(t, 0, OFFSET_BEGINNING) for t in topics])
        self.c.poll(1.0)
        self.lat = []  # (CreateTime ms, receive - CreateTime ms)
        self.n = 0

    def drain(self, seconds):
        for m in self.c.consume(2000, seconds):
            if m.error():
                continue
            now = time.time() * 1000.0
            kind, ts = m.timestamp()
            self.n += 1
            if kind == 1:  # TIMESTAMP_CREATE_TIME
                self.lat.append((ts, now - ts))

    def figures(self, warmup_s):
        if not self.lat:
            return None
        t0 = min(t for t, _ in self.lat)
        v = sorted(d for t, d in self.lat if t >= t0 + warmup_s * 1000.0)
        if not v:
            return None
        pick = lambda q: v[min(len(v) - 1, int(q * len(v)))]
        return {"p50": pick(0.5), "p99": pick(0.99), "max": v[-1], "n": len(v)}

    def close(self):
        self.c.close()


class Mock(object):
    """librdkafka's mock cluster, owned by a producer of this process."""

    def __init__(self):
        from confluent_kafka import Producer
        self.owner = Producer({"test.mock.num.brokers": 1, "log_level": 3})
        md = self.owner.list_topics(timeout=10)
        self.bootstrap = ",".join("%s:%d" % (b.host, b.port) for b in md.brokers.values())


def run(a, mode, tasks, sink, bootstrap, data, eos, boundary):
    """One run of the daemon; eos True with boundary "poll" or "interval:MS"."""
    work = tempfile.mkdtemp(prefix="wire_bench.")
    tag = uuid.uuid4().hex[:10]
    prefix = "bench%s" % tag
    shards = tasks if tasks > 1 else 0
    if mode == "stream":
        argv = ["--events", str(a.events), "--collections", "0", "--docs", "0"]
        expect = tasks * (a.events + a.events // 10)  # a delete is followed by its tombstone
    else:
        argv = ["--events", "0", "--collections", str(a.collections),
                "--docs", str(a.docs // a.collections)]
        expect = tasks * (a.docs // a.collections) * a.collections
    if a.latency:
        argv += ["--rate", str(a.rate)]
    if shards and mode == "stream" and a.chunks:
        argv += ["--chunks", str(a.chunks)]
        if a.migrate and shards >= 2:
            # at half the stream, on a reply boundary
            argv += ["--migrate", str(max(1, a.events // 2 // a.batch) * a.batch)]
        if a.slow_shard_ms:
            argv += ["--slow-shard-ms", str(a.slow_shard_ms)]
    srv = subprocess.Popen([a.server, "--port", "0", "--batch", str(a.batch), "--shards", str(shards)]
                           + argv + sum((["--data", d] for d in data), []),
                           stdout=subprocess.PIPE, stderr=open(os.path.join(work, "server.log"), "wb"),
                           text=True)
    try:
        ready = srv.stdout.readline().split()
        if not ready or ready[0] != "ready":
            raise RuntimeError("replay_server did not start (see %s/server.log)" % work)
        port = int(ready[1])
        mport = free_port()
        cfg = os.path.join(work, "cfg.yaml")
        with open(cfg, "w") as f:
            f.write('topic.prefix: %s\n' % prefix)
            f.write(''
                    'mongodb.connection.string: "mongodb://127.0.0.1:%d/%s"\n'
                    'mongodb.connection.mode: replica_set\n'
                    'snapshot.mode: %s\nsnapshot.max.threads: %d\n'
                    'cursor.max.await.time.ms: 200\n'
                    'offsets.file.path: "%s/offsets.json"\noffsets.flush.interval.ms: 1000\n'
                    'metrics.enabled: true\nmetrics.http.port: %d\nlog.level: info\n'
                    % (port, "" if shards else "?replicaSet=rs0",
                       "no_data" if mode == "stream" else "initial", a.readers, work, mport))
            for kv in a.set:
                k, v = kv.split("=", 1)
                f.write('%s: %s\n' % (k, v))
            if sink == "file":
                f.write('sink.type: file\nsink.path: "%s/events.jsonl"\n' % work)
            else:
                f.write('sink.type: kafka\nkafka:\n  bootstrap.servers: "%s"\n' % bootstrap)
                for kv in a.kafka_prop:
                    k, v = kv.split("=", 1)
                    f.write('  %s: "%s"\n' % (k, v))
            if eos:
                f.write('exactly.once.support: required\noffsets.storage: kafka\n'
                        'offsets.topic: "bench-offsets-%s"\n' % tag)
                if boundary == "poll":
                    f.write('transaction.boundary: poll\nmax.batch.size: %d\n' % a.max_batch)
                else:
                    f.write('transaction.boundary: interval\ntransaction.boundary.interval.ms: %d\n'
                            % int(boundary.split(":", 1)[1]))
        lat = Latency(bootstrap, topics_of(prefix, data), a.mock) if a.latency else None
        if a.precreate and lat is None and sink != "file":
            create_topics(bootstrap, topics_of(prefix, data, mode, a.collections), a.mock)  # the daemon creates its offsets topic
        log = open(os.path.join(work, "daemon.log"), "wb")
        t0 = time.monotonic()
        s0 = cpu_s(srv.pid)
        p = subprocess.Popen(a.wrap.split() + [a.bin, "-c", cfg], stderr=log)
        done = None
        txt = ""
        try:
            n = 0
            while time.monotonic() - t0 < a.timeout:
                n = acked(mport)
                if n >= expect and (lat is None or lat.n >= expect):
                    if done is None:
                        done = (time.monotonic() - t0, cpu_s(p.pid), peak_rss_mib(p.pid),
                                cpu_s(srv.pid) - s0)
                    break
                if p.poll() is not None:
                    break
                if lat is not None:
                    lat.drain(0.2)
                    if n >= expect and done is None:  # the daemon's figures end at its last ack
                        done = (time.monotonic() - t0, cpu_s(p.pid), peak_rss_mib(p.pid),
                                cpu_s(srv.pid) - s0)
                else:
                    time.sleep(0.02)
            txt = metrics(mport)
        finally:
            p.terminate()
            p.wait(60)
            log.close()
            if lat is not None:
                lat.close()
        if done is None:
            print("  %s %d task(s): only %d of %d records acknowledged (logs in %s)"
                  % (mode, tasks, n, expect, work))
            return None
        wall, cpu, rss, scpu = done
        res = {"rps": expect / wall, "cpu": cpu * 1e6 / expect, "rss": rss,
               "srv": scpu / wall, "n": expect, "work": work, "txn": txn_figures(txt)}
        if lat is not None:
            res["lat"] = lat.figures(a.warmup)
        with open(os.path.join(work, "daemon.log"), "rb") as f:
            text = f.read().decode(errors="replace")
        # the order gate's figures, one line per shard task (logged at stop)
        res["gate"] = [(int(m.group(1)), float(m.group(2)), float(m.group(3)))
                       for m in GATE_RE.finditer(text)]
        res["held"] = [(int(m.group(1)), int(m.group(2))) for m in HELD_RE.finditer(text)]
        with open(os.path.join(work, "daemon.log"), "rb") as f:
            # warnings and errors, but the oplog headroom one: the replay
            # server's oplog is "full" from its first entry, by design
            res["log_warn"] = [l.decode(errors="replace").rstrip() for l in f
                               if (b"WARN" in l or b"ERROR" in l or b"abort" in l.lower())
                               and b"oplog headroom" not in l][:20]
        return res
    finally:
        srv.terminate()
        srv.wait(30)


def spread(vals, fmt):
    """min..max; from three values on, the median first: "med [min..max]"."""
    vals = sorted(v for v in vals if v is not None)
    if not vals:
        return "-"
    lo, hi = vals[0], vals[-1]
    if len(vals) == 1:
        return fmt % lo
    if len(vals) < 3:
        return (fmt % lo) + ".." + (fmt % hi)
    n = len(vals)
    med = vals[n // 2] if n % 2 else (vals[n // 2 - 1] + vals[n // 2]) / 2.0
    return "%s [%s..%s]" % (fmt % med, fmt % lo, fmt % hi)


def bounds(a, sink, bootstrap, data):
    """The bounds of the same events as the stream runs (issue "The daemon's
    own ceiling"): the replay server writes one reply's change events
    (--dump-events), and e2e_bench replays --events of them from memory:
    encode-only (event_from_change + encoder_encode), raw produce (the
    pre-encoded records through the daemon's sink code into the same sink:
    the same mock cluster, broker or a file sink) and its own in-memory
    end-to-end (no wire, no libmongoc). Figures per record (a delete's
    tombstone is a record, as in the daemon's runs); None when it fails."""
    work = tempfile.mkdtemp(prefix="wire_bench_bounds.")
    try:
        ev = os.path.join(work, "events.bson")
        subprocess.run([a.server, "--port", "0", "--batch", str(a.batch), "--dump-events", ev]
                       + sum((["--data", d] for d in data), []), check=True,
                       stdout=subprocess.DEVNULL)
        target = bootstrap if sink != "file" else "file:%s/bounds.jsonl" % work
        out = subprocess.run([a.e2e, "--events", ev, "--count", str(a.events), "--rate", "0",
                              target], capture_output=True, text=True, timeout=a.timeout)
        res, ratio = {}, None
        for m in BOUND_RE.finditer(out.stdout):
            if m.group(7):
                ratio = int(m.group(7)) / float(m.group(3))
            res[m.group(2)] = (float(m.group(4)), float(m.group(5)))
        if out.returncode != 0 or len(res) < 3 or ratio is None:
            print("  bounds: e2e_bench failed (%d): %s" % (out.returncode, out.stderr[-500:]))
            return None
        # per record: events/s * records per event, CPU per million records
        return dict((k, (eps * ratio, cpu / ratio)) for k, (eps, cpu) in res.items())
    finally:
        shutil.rmtree(work, ignore_errors=True)


def settings(a):
    """[(eos, boundary)] in the order the runs of one repeat alternate."""
    out = []
    for e in [x for x in a.eos.split(",") if x]:
        if e not in ("off", "on"):
            raise SystemExit("--eos takes off, on or off,on")
        if e == "off":
            out.append((False, "-"))
            continue
        for b in [x for x in a.boundary.split(",") if x]:
            if b != "poll" and not re.match(r"^interval:\d+$", b):
                raise SystemExit("--boundary takes poll or interval:MS (got %s)" % b)
            out.append((True, b))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sink", default="mock", choices=("mock", "kafka", "file"))
    ap.add_argument("--kafka", help="bootstrap servers of a real broker (--sink kafka)")
    ap.add_argument("--kafka-prop", action="append", default=[],
                    help="extra librdkafka property k=v for the daemon's producer")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="extra daemon config key, e.g. snapshot.resumable=true")
    ap.add_argument("--tasks", default="1,2,4")
    ap.add_argument("--modes", default="stream,snapshot")
    ap.add_argument("--events", type=int, default=500000, help="change events per task")
    ap.add_argument("--docs", type=int, default=300000, help="snapshot documents per task")
    ap.add_argument("--collections", type=int, default=4, help="snapshot collections per task")
    ap.add_argument("--readers", type=int, default=4, help="snapshot.max.threads")
    ap.add_argument("--batch", type=int, default=1000, help="documents per server reply")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--eos", default="off", help="off, on or off,on (alternating in each repeat)")
    ap.add_argument("--boundary", default="poll",
                    help="with eos on: poll or interval:MS, or a comma list of them")
    ap.add_argument("--max-batch", type=int, default=2048, help="max.batch.size (poll boundary)")
    ap.add_argument("--latency", action="store_true",
                    help="end-to-end latency at --rate events/s per task (stream, kafka or mock sink)")
    ap.add_argument("--rate", type=float, default=20000, help="change events per second per task")
    ap.add_argument("--warmup", type=float, default=2.0,
                    help="latency: seconds of records left out at the start")
    ap.add_argument("--precreate", action="store_true",
                    help="create the run's topics before the daemon starts (--latency always does)")
    ap.add_argument("--data", action="append", help="dataset file (default: a mix of eight)")
    ap.add_argument("--datasets", default=os.environ.get("MCDC_SHARED_DIR", "") and
                    os.path.join(os.environ["MCDC_SHARED_DIR"], "datasets"),
                    help="folder of the datasets (default $MCDC_SHARED_DIR/datasets)")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "mongocdc"))
    ap.add_argument("--server", default=os.path.join(ROOT, "build", "bench", "replay_server"))
    ap.add_argument("--e2e", default=os.path.join(ROOT, "build", "bench", "e2e_bench"))
    ap.add_argument("--chunks", type=int, default=0,
                    help="stream, 2+ tasks: the datasets' namespaces are sharded collections of "
                    "this many chunks, each shard replaying its own (replay_chunks.c)")
    ap.add_argument("--migrate", action="store_true",
                    help="with --chunks: the first namespace's chunks move from the first shard "
                    "to the second at half the stream")
    ap.add_argument("--slow-shard-ms", type=int, default=0,
                    help="with --chunks: each change-stream getMore of the first shard waits this")
    ap.add_argument("--no-bounds", action="store_true",
                    help="leave out the encode-only and raw-produce bounds of the stream events")
    ap.add_argument("--keep", action="store_true", help="keep the run directories")
    ap.add_argument("--wrap", default="", help="command line the daemon runs under, e.g. "
                    "'perf record -g -o perf.data --' (the CPU and RSS figures are then the wrapper's)")
    a = ap.parse_args()
    data = a.data or [os.path.join(a.datasets, d) for d in DEFAULT_DATA]
    data = [d for d in data if glob.glob(d)]
    if not data:
        ap.error("no dataset files: give --datasets DIR or --data FILE")
    sets = settings(a)
    if a.sink == "file" and any(e for e, _ in sets):
        ap.error("--eos on needs a Kafka sink (mock or kafka)")
    if a.latency and (a.sink == "file" or a.modes != "stream"):
        ap.error("--latency needs --modes stream and a Kafka sink (mock or kafka)")
    bootstrap, a.mock = None, None
    if a.sink == "mock":
        a.mock = Mock()
        bootstrap = a.mock.bootstrap
    elif a.sink == "kafka":
        if not a.kafka:
            ap.error("--sink kafka needs --kafka host:port")
        bootstrap = a.kafka
    print("wire_bench: sink %s, %d events / %d snapshot documents per task, %d readers, "
          "replies of %d documents, %d dataset files%s"
          % (a.sink, a.events, a.docs, a.readers, a.batch, len(data),
             ", paced at %.0f events/s per task" % a.rate if a.latency else ""))
    ok = True
    rows, brows = [], []
    for mode in [m for m in a.modes.split(",") if m]:
        for tasks in [int(t) for t in a.tasks.split(",") if t]:
            res = dict((st, []) for st in sets)
            for _ in range(a.repeat):
                for st in sets:  # alternating: every setting meets the same load
                    r = run(a, mode, tasks, a.sink, bootstrap, data, st[0], st[1])
                    if r is None:
                        ok = False
                        continue
                    res[st].append(r)
                    for l in r["log_warn"]:
                        print("  [%s %s] %s" % ("eos" if st[0] else "no eos", st[1], l))
                    if not a.keep:
                        shutil.rmtree(r["work"], ignore_errors=True)
                    sys.stdout.flush()
            rows.append((mode, tasks, res))
        if mode == "stream" and not a.no_bounds and not a.latency:
            for _ in range(a.repeat):
                b = bounds(a, a.sink, bootstrap, data)
                if b is not None:
                    brows.append(b)
                sys.stdout.flush()
    print("%-9s %5s %4s %12s %16s %8s %9s %7s %10s %7s %15s %15s %10s"
          % ("mode", "tasks", "eos", "boundary", "records/s", "CPU-s/M", "RSS MiB", "srv",
             "txn commit", "abort", "commit p50 ms", "commit p99 ms", "mean ms"))
    for mode, tasks, res in rows:
        for (eos, b), rs in res.items():
            if not rs:
                continue
            t = [r["txn"] for r in rs]
            ms = lambda k: [x[k] * 1000.0 if x[k] is not None else None for x in t]
            print("%-9s %5d %4s %12s %16s %8s %9s %7s %10s %7s %15s %15s %10s" % (
                mode, tasks, "on" if eos else "off", b, spread([r["rps"] for r in rs], "%.0f"),
                spread([r["cpu"] for r in rs], "%.2f"), spread([r["rss"] for r in rs], "%.0f"),
                spread([r["srv"] for r in rs], "%.2f"),
                spread([x["committed"] for x in t], "%d"), spread([x["aborted"] for x in t], "%d"),
                spread(ms("p50"), "%.1f"), spread(ms("p99"), "%.0f"), spread(ms("mean"), "%.1f")))
    if any(r.get("gate") for _, _, res in rows for rs in res.values() for r in rs):
        print("order gate, per shard task (daemon log at stop; added latency per checked event):")
        print("%-9s %5s %4s %12s %16s %14s %14s %12s" % ("mode", "tasks", "eos", "boundary",
                                                       "events checked", "p50 us", "p99 us", "held (ms)"))
        for mode, tasks, res in rows:
            for (eos, b), rs in res.items():
                g = [x for r in rs for x in r.get("gate", [])]
                if not g:
                    continue
                h = [x for r in rs for x in r.get("held", [])]
                print("%-9s %5d %4s %12s %16s %14s %14s %12s" % (
                    mode, tasks, "on" if eos else "off", b, spread([x[0] for x in g], "%d"),
                    spread([x[1] for x in g], "%.2f"), spread([x[2] for x in g], "%.2f"),
                    "%d (%d)" % (sum(x[0] for x in h), sum(x[1] for x in h)) if h else "0"))
    if brows:
        print("bounds of the same %d stream events (e2e_bench --events, one task's worth; "
              "per record, sink %s):" % (a.events, a.sink))
        print("%-22s %16s %14s" % ("", "records/s", "CPU-s/M"))
        for k, label in (("encode-only", "encode-only"), ("raw-produce", "raw produce"),
                         ("end-to-end", "in-memory end-to-end")):
            print("%-22s %16s %14s" % (label, spread([b[k][0] for b in brows], "%.0f"),
                                       spread([b[k][1] for b in brows], "%.2f")))
    if a.latency:
        print("end-to-end latency, receive - CreateTime, read_committed, after %.0f s warm-up (ms):"
              % a.warmup)
        print("%-9s %5s %4s %12s %14s %14s %14s %10s" % ("mode", "tasks", "eos", "boundary",
                                                       "p50", "p99", "max", "records"))
        for mode, tasks, res in rows:
            for (eos, b), rs in res.items():
                ls = [r["lat"] for r in rs if r.get("lat")]
                if not ls:
                    continue
                print("%-9s %5d %4s %12s %14s %14s %14s %10s" % (
                    mode, tasks, "on" if eos else "off", b, spread([x["p50"] for x in ls], "%.1f"),
                    spread([x["p99"] for x in ls], "%.1f"), spread([x["max"] for x in ls], "%.0f"),
                    spread([x["n"] for x in ls], "%d")))
    sys.stdout.flush()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
