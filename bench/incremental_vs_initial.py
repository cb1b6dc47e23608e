#!/usr/bin/python3
"""incremental_vs_initial: the incremental snapshot's rows/s against the
initial snapshot's on the same collection, mongocdc's peak RSS for
incremental.snapshot.chunk.size 1024 and 16384, and the streaming latency
(p50/p99) of inserts made while the snapshot runs against the same inserts
with no snapshot running (issue "Incremental snapshots", figures).

One simulator holds N documents (~1 KB each). Run 1: snapshot.mode
initial_only copies them (rows/s from the first to the last `r` record in the
sink file). Runs 2..: snapshot.mode no_data, one execute-snapshot signal, rows/s
from the engine's own summary line; peak RSS (VmHWM) read just before the
stop. The simulator serves every run, so the figures compare mongocdc's two
snapshot paths more than they predict a real server's throughput.

    bench/incremental_vs_initial.py [--count N] [--bin build/mongocdc]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "mongosim"))
from mongosim import MongoSim  # noqa: E402


def peak_rss_kb(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def config(work, uri, name, extra):
    path = os.path.join(work, name + ".yaml")
    with open(path, "w") as f:
        f.write('topic.prefix: bench\nmongodb.connection.string: "%s"\n'
                'debezium.compatibility: "3.x"\nsink.type: file\nsink.path: "%s/%s.jsonl"\n'
                'offsets.file.path: "%s/%s.off.json"\noffsets.flush.interval.ms: 1000\n'
                'signal.data.collection: "bench.signals"\ncursor.max.await.time.ms: 200\n'
                % (uri, work, name, work, name))
        for k, v in extra.items():
            f.write("%s: %s\n" % (k, json.dumps(v)))
    return path


def initial(binary, work, uri, count):
    cfg = config(work, uri, "initial", {"snapshot.mode": "initial_only"})
    t0 = time.monotonic()
    subprocess.run([binary, "-c", cfg], stderr=open(os.path.join(work, "initial.log"), "wb"),
                   timeout=600, check=True)
    wall = time.monotonic() - t0
    n = sum(1 for line in open(os.path.join(work, "initial.jsonl")) if '"op":"r"' in line)
    assert n >= count, n
    return n / wall


class Pinger:
    """Inserts {t: wall clock} into bench.lat every 20 ms from a thread."""

    def __init__(self, sim):
        import threading
        self.c = sim.client()
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run)
        self.t.start()

    def run(self):
        while not self.stop.is_set():
            self.c.bench.lat.insert_one({"t": time.time()})
            time.sleep(0.02)

    def end(self):
        self.stop.set()
        if self.t.is_alive():
            self.t.join()


def latencies(sink, since, until, commit=False):
    """ms from each bench.lat insert made in [since, until) to its record (the
    record's top-level ts_ms), sorted. commit: from the server's commit (the
    event's wallTime) instead of the client's insert call, which leaves out
    the insert's own round trip (a busy simulator answers it late)."""
    out = []
    for line in open(sink):
        if '"topic": "bench.bench.lat"' not in line or '"op":"c"' not in line:
            continue
        v = json.loads(line)["value"]
        t = json.loads(v["after"])["t"]
        if since <= t < until:
            t0 = v["source"]["wallTime"] if commit else t * 1000.0
            out.append(v["ts_ms"] - t0)
    return sorted(out)


def pct(xs, p):
    return xs[min(len(xs) - 1, int(len(xs) * p))] if xs else float("nan")


def incremental(binary, work, uri, sim, chunk, read_only=False, quiet=False, fetch=0):
    name = "incr%d%s" % (chunk, "ro" if read_only else "")
    extra = {"snapshot.mode": "no_data", "read.only": read_only,
             "incremental.snapshot.chunk.size": chunk}
    if fetch > 0:
        extra["snapshot.fetch.size"] = fetch
    cfg = config(work, uri, name, extra)
    logp = os.path.join(work, name + ".log")
    p = subprocess.Popen([binary, "-c", cfg], stderr=open(logp, "wb"))
    deadline = time.monotonic() + 60
    while "streaming changes from" not in open(logp).read():
        assert time.monotonic() < deadline and p.poll() is None, open(logp).read()[-2000:]
        time.sleep(0.1)
    ping = Pinger(sim) if not quiet else None
    try:
        t_idle = time.time()
        time.sleep(3)  # the baseline: streaming alone
        t_snap = time.time()
        sid = "bench-%d" % chunk
        sim.client().bench.signals.insert_one(
            {"_id": sid, "type": "execute-snapshot", "data": {"data-collections": ["bench.docs"]}})
        deadline = time.monotonic() + 900
        while "(signal %s) completed" % sid not in open(logp).read():
            assert time.monotonic() < deadline and p.poll() is None, open(logp).read()[-2000:]
            time.sleep(0.2)
        t_end = time.time()
        if ping:
            ping.end()
        time.sleep(1)
        rss = peak_rss_kb(p.pid)
        sink = os.path.join(work, name + ".jsonl")
        base = latencies(sink, t_idle, t_snap)
        during = latencies(sink, t_snap, t_end)
        during_commit = latencies(sink, t_snap, t_end, commit=True)
    finally:
        if ping:
            ping.end()
        p.terminate()
        p.wait(30)
    m = re.search(r"bench\.docs done: (\d+) rows in ([\d.]+) s \((\d+) rows/s\)", open(logp).read())
    return int(m.group(3)), rss, during, base, during_commit


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "mongocdc"))
    ap.add_argument("--fetch-size", type=int, default=0,
                    help="snapshot.fetch.size: documents per reply of a chunk read (the "
                         "simulator serves one command at a time, so smaller replies let the "
                         "change stream in between them)")
    ap.add_argument("--read-only", action="store_true",
                    help="read.only: cluster-time windows instead of markers")
    ap.add_argument("--quiet", action="store_true",
                    help="no inserts during the snapshot (a quiet stream: cluster-time "
                         "windows then close on empty batches); no latency figures")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="incremental_vs_initial.")
    with MongoSim(members=1) as sim:
        c = sim.client()
        pad = "x" * 1000
        for i in range(0, a.count, 1000):
            c.bench.docs.insert_many([{"_id": j, "pad": pad} for j in range(i, min(a.count, i + 1000))])
        init_rate = initial(a.bin, work, sim.uri, a.count)
        print("initial snapshot: %.0f rows/s (%d documents of ~1 KB)" % (init_rate, a.count))
        for chunk in (1024, 16384):
            rate, rss, during, base, dcommit = incremental(a.bin, work, sim.uri, sim, chunk,
                                                           a.read_only, a.quiet, a.fetch_size)
            print("incremental snapshot, chunk.size %5d: %6d rows/s (%.0f%% of initial), "
                  "peak RSS %.1f MiB; streaming latency p50/p99 %.0f/%.0f ms during it "
                  "(%d inserts; from the commit %.0f/%.0f ms), %.0f/%.0f ms before it"
                  % (chunk, rate, 100.0 * rate / init_rate, rss / 1024.0, pct(during, 0.5),
                     pct(during, 0.99), len(during), pct(dcommit, 0.5), pct(dcommit, 0.99),
                     pct(base, 0.5), pct(base, 0.99)))
    print("work folder: %s" % work)


if __name__ == "__main__":
    main()
