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
is from being the bound. Each run repeats --repeat times; min..max is printed.
Figures are reported, never asserted: the machine is shared.

    bench/wire_bench.py [--sink mock|kafka|file] [--kafka HOST:PORT]
                        [--tasks 1,2,4] [--modes stream,snapshot]
                        [--events N] [--docs N] [--readers R] [--repeat R]
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


def acked(port):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=2) as r:
            text = r.read().decode()
    except OSError:
        return 0
    return sum(int(m.group(1)) for m in ACK_RE.finditer(text))


class Mock(object):
    """librdkafka's mock cluster, owned by a producer of this process."""

    def __init__(self):
        from confluent_kafka import Producer
        self.owner = Producer({"test.mock.num.brokers": 1, "log_level": 3})
        md = self.owner.list_topics(timeout=10)
        self.bootstrap = ",".join("%s:%d" % (b.host, b.port) for b in md.brokers.values())


def run(a, mode, tasks, sink, bootstrap, data):
    work = tempfile.mkdtemp(prefix="wire_bench.")
    shards = tasks if tasks > 1 else 0
    if mode == "stream":
        argv = ["--events", str(a.events), "--collections", "0", "--docs", "0"]
        expect = tasks * (a.events + a.events // 10)  # a delete is followed by its tombstone
    else:
        argv = ["--events", "0", "--collections", str(a.collections),
                "--docs", str(a.docs // a.collections)]
        expect = tasks * (a.docs // a.collections) * a.collections
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
            f.write('topic.prefix: bench\n'
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
        log = open(os.path.join(work, "daemon.log"), "wb")
        t0 = time.monotonic()
        s0 = cpu_s(srv.pid)
        p = subprocess.Popen(a.wrap.split() + [a.bin, "-c", cfg], stderr=log)
        done = None
        try:
            n = 0
            while time.monotonic() - t0 < a.timeout:
                n = acked(mport)
                if n >= expect:
                    done = (time.monotonic() - t0, cpu_s(p.pid), peak_rss_mib(p.pid), cpu_s(srv.pid) - s0)
                    break
                if p.poll() is not None:
                    break
                time.sleep(0.02)
        finally:
            p.terminate()
            p.wait(60)
            log.close()
        if done is None:
            print("  %s %d task(s): only %d of %d records acknowledged (logs in %s)"
                  % (mode, tasks, n, expect, work))
            return None
        wall, cpu, rss, scpu = done
        return {"rps": expect / wall, "cpu": cpu * 1e6 / expect, "rss": rss,
                "srv": scpu / wall, "n": expect, "work": work}
    finally:
        srv.terminate()
        srv.wait(30)


def spread(vals, fmt):
    lo, hi = min(vals), max(vals)
    return fmt % lo if len(vals) == 1 else (fmt % lo) + ".." + (fmt % hi)


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
    ap.add_argument("--data", action="append", help="dataset file (default: a mix of eight)")
    ap.add_argument("--datasets", default=os.environ.get("MCDC_SHARED_DIR", "") and
                    os.path.join(os.environ["MCDC_SHARED_DIR"], "datasets"),
                    help="folder of the datasets (default $MCDC_SHARED_DIR/datasets)")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "mongocdc"))
    ap.add_argument("--server", default=os.path.join(ROOT, "build", "bench", "replay_server"))
    ap.add_argument("--keep", action="store_true", help="keep the run directories")
    ap.add_argument("--wrap", default="", help="command line the daemon runs under, e.g. "
                    "'perf record -g -o perf.data --' (the CPU and RSS figures are then the wrapper's)")
    a = ap.parse_args()
    data = a.data or [os.path.join(a.datasets, d) for d in DEFAULT_DATA]
    data = [d for d in data if glob.glob(d)]
    if not data:
        ap.error("no dataset files: give --datasets DIR or --data FILE")
    bootstrap, mock = None, None
    if a.sink == "mock":
        mock = Mock()
        bootstrap = mock.bootstrap
    elif a.sink == "kafka":
        if not a.kafka:
            ap.error("--sink kafka needs --kafka host:port")
        bootstrap = a.kafka
    print("wire_bench: sink %s, %d events / %d snapshot documents per task, %d readers, "
          "replies of %d documents, %d dataset files"
          % (a.sink, a.events, a.docs, a.readers, a.batch, len(data)))
    print("%-9s %5s %18s %20s %16s %14s" % ("mode", "tasks", "records/s", "CPU-s per million",
                                             "peak RSS MiB", "server cores"))
    ok = True
    for mode in [m for m in a.modes.split(",") if m]:
        for tasks in [int(t) for t in a.tasks.split(",") if t]:
            res = []
            for _ in range(a.repeat):
                r = run(a, mode, tasks, a.sink, bootstrap, data)
                if r is None:
                    ok = False
                    break
                res.append(r)
                if not a.keep:
                    shutil.rmtree(r["work"], ignore_errors=True)
            if not res:
                continue
            print("%-9s %5d %18s %20s %16s %14s" % (
                mode, tasks, spread([r["rps"] for r in res], "%.0f"),
                spread([r["cpu"] for r in res], "%.2f"), spread([r["rss"] for r in res], "%.1f"),
                spread([r["srv"] for r in res], "%.2f")))
            sys.stdout.flush()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
