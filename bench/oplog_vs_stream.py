#!/usr/bin/python3
"""oplog_vs_stream: capture.mode oplog against change streams on the same
workload (issue "Legacy oplog capture", figures).

For each mode: a first mongocdc run stores a position and stops; N inserts
(~1 KB) and N/2 updates are then written while it is down; a second run
drains them to a JSON-lines file. Figures per mode: events/s of the drain,
mongocdc CPU seconds (user+sys from /proc) per million events, and peak RSS
(VmHWM). The simulator serves both modes, so the numbers compare mongocdc's
two readers more than they predict a real server's throughput.

    bench/oplog_vs_stream.py [--count N] [--bin build/mongocdc]
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
from mongosim import MongoSim  # noqa: E402


def cpu_s(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_kb(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def run_mode(binary, mode, count):
    work = tempfile.mkdtemp(prefix="oplog_vs_stream.")
    with MongoSim(members=3) as sim:
        cfg = os.path.join(work, "cfg.yaml")
        with open(cfg, "w") as f:
            f.write('topic.prefix: bench\nmongodb.connection.string: "%s"\nsnapshot.mode: no_data\n'
                    'debezium.compatibility: "1.9"\ncapture.mode: %s\n'
                    'sink.type: file\nsink.path: "%s/events.jsonl"\noffsets.file.path: "%s/off.json"\n'
                    'offsets.flush.interval.ms: 1000\n' % (sim.uri, mode, work, work))
        log = open(os.path.join(work, "log"), "wb")
        p = subprocess.Popen([binary, "-c", cfg], stderr=log)
        time.sleep(3)
        p.terminate()
        p.wait(30)
        c = sim.client()
        pad = "x" * 900
        for i in range(0, count, 500):
            c.bench.w.insert_many([{"_id": j, "pad": pad, "n": 0}
                                   for j in range(i, min(count, i + 500))])
        for j in range(0, count, 2):
            c.bench.w.update_one({"_id": j}, {"$set": {"n": 1}})
        total = count + (count + 1) // 2
        os.unlink(os.path.join(work, "events.jsonl"))
        p = subprocess.Popen([binary, "-c", cfg], stderr=log)
        t0, c0 = time.monotonic(), cpu_s(p.pid)
        path = os.path.join(work, "events.jsonl")
        n, t_end, c_end, rss = 0, None, None, 0
        while time.monotonic() - t0 < 900:
            try:
                with open(path, "rb") as f:
                    n = sum(1 for _ in f)
            except OSError:
                n = 0
            if n >= total:
                t_end, c_end, rss = time.monotonic(), cpu_s(p.pid), peak_rss_kb(p.pid)
                break
            time.sleep(0.05)
        p.terminate()
        p.wait(30)
        if t_end is None:
            print("%s: only %d of %d events arrived" % (mode, n, total))
            return None
        wall = t_end - t0
        cpu = c_end - c0
        print("%-15s %d events in %.1f s: %.0f events/s, %.1f CPU-s per million events, "
              "peak RSS %.1f MiB" % (mode, total, wall, total / wall, cpu * 1e6 / total,
                                     rss / 1024.0))
        return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "mongocdc"))
    a = ap.parse_args()
    ok = True
    for mode in ("oplog", "change_streams"):
        ok = run_mode(a.bin, mode, a.count) is not None and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
