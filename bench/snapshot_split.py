#!/usr/bin/python3
"""snapshot_split: the initial snapshot of one large collection with
snapshot.max.threads 1 and 4 (issue 9, figures), the 4-thread run splitting
the collection into `_id` ranges (snapshot.collection.split.min.documents).

One collection of N documents (~200 B, int32 `_id`s) is loaded once; each run
is `snapshot.mode: initial_only` to a JSON-lines file and exits when done.
Figures per run: rows/s (wall time of the whole run, start to exit), mongocdc
CPU seconds (user+sys from /proc, also per million rows), the server's CPU
seconds over the run (the simulator's process; not measured for
MONGO_TEST_URI), and the daemon's own "snapshot complete" line.

Against MONGO_TEST_URI when set (a real MongoDB), else the simulator: it is single-threaded Python without indexes, so its
figures measure mongocdc's side (CPU per row, overlap of reads) more than what
parallel ranges give on a real server.

    bench/snapshot_split.py [--count N] [--bin build/mongocdc] [--threads 1,4]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "mongosim"))


def cpu_s(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def run(binary, uri, threads, count, min_docs, server_pid):
    work = tempfile.mkdtemp(prefix="snapshot_split.")
    cfg = os.path.join(work, "cfg.yaml")
    with open(cfg, "w") as f:
        f.write('topic.prefix: bench\nmongodb.connection.string: "%s"\n'
                'snapshot.mode: initial_only\nsnapshot.max.threads: %d\n'
                'snapshot.collection.split.min.documents: %d\n'
                'snapshot.include.collection.list: "bench\\\\.big"\n'
                'sink.type: file\nsink.path: "%s/events.jsonl"\noffsets.file.path: "%s/off.json"\n'
                % (uri, threads, min_docs, work, work))
    log_path = os.path.join(work, "log")
    with open(log_path, "wb") as log:
        t0, s0 = time.monotonic(), cpu_s(server_pid) if server_pid else 0.0
        p = subprocess.Popen([binary, "-c", cfg], stderr=log,
                             env=dict(os.environ, MONGOC_DISABLE_SHM="1"))
        cpu = 0.0
        while p.poll() is None:
            try:
                cpu = cpu_s(p.pid)
            except OSError:
                pass
            time.sleep(0.05)
        wall = time.monotonic() - t0
        server_cpu = cpu_s(server_pid) - s0 if server_pid else float("nan")
    with open(os.path.join(work, "events.jsonl"), "rb") as f:
        n = sum(1 for _ in f)
    summary = [ln for ln in open(log_path, errors="replace") if "snapshot complete" in ln
               or "_id ranges" in ln]
    print("threads %d: %d rows in %.1f s: %.0f rows/s; mongocdc %.2f CPU-s (%.1f per million "
          "rows); server %.1f CPU-s%s" % (threads, n, wall, n / wall, cpu, cpu * 1e6 / max(n, 1),
                                          server_cpu, " (simulator)" if server_pid else
                                          " (not measured)"))
    for ln in summary:
        print("   " + ln.strip().split("] ", 1)[-1])
    if n != count:
        print("   MISMATCH: %d rows for %d documents" % (n, count))
    return n == count


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=500000)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "mongocdc"))
    ap.add_argument("--threads", default="1,4")
    a = ap.parse_args()
    sim = None
    uri = os.environ.get("MONGO_TEST_URI")
    if not uri:
        from mongosim import MongoSim
        sim = MongoSim(members=1)
        sim.start()
        uri = sim.uri
    from pymongo import MongoClient
    c = MongoClient(uri)
    c.bench.big.drop()
    pad = "x" * 150
    t0 = time.monotonic()
    for i in range(0, a.count, 5000):
        c.bench.big.insert_many([{"_id": j, "n": j, "pad": pad}
                                 for j in range(i, min(a.count, i + 5000))], ordered=False)
    print("loaded %d documents in %.1f s" % (a.count, time.monotonic() - t0))
    ok = True
    for t in [int(x) for x in a.threads.split(",")]:
        ok = run(a.bin, uri, t, a.count, max(1, a.count // 8),
                 sim.proc.pid if sim is not None else None) and ok
    c.close()
    if sim is not None:
        sim.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
