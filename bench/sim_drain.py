#!/usr/bin/python3
"""sim_drain: what one simulator change stream delivers to mongocdc, and the
daemon's CPU share while draining it (issue "Main job end to end", Speed).

A first mongocdc run stores a position and stops; N inserts (~1 KB) are then
written while it is down; a second run drains them to a JSON-lines file. The
figures: events/s of the drain (first to last record) and mongocdc's CPU
seconds (user+sys from /proc) over the same time, as a share of one core.

    bench/sim_drain.py [--count N] [--bin build/mongocdc]
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "mongocdc"))
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="sim_drain.")
    with MongoSim(members=3) as sim:
        cfg = os.path.join(work, "cfg.yaml")
        with open(cfg, "w") as f:
            f.write('topic.prefix: drain\nmongodb.connection.string: "%s"\nsnapshot.mode: no_data\n'
                    'sink.type: file\nsink.path: "%s/events.jsonl"\noffsets.file.path: "%s/off.json"\n'
                    'offsets.flush.interval.ms: 1000\n' % (sim.uri, work, work))
        log = open(os.path.join(work, "log"), "wb")
        p = subprocess.Popen([a.bin, "-c", cfg], stderr=log)
        time.sleep(3)
        p.terminate()
        p.wait(30)
        c = sim.client()
        pad = "x" * 900
        for i in range(0, a.count, 500):
            c.bench.drain.insert_many([{"_id": j, "pad": pad} for j in range(i, min(a.count, i + 500))])
        os.unlink(os.path.join(work, "events.jsonl"))
        p = subprocess.Popen([a.bin, "-c", cfg], stderr=log)
        t0, c0 = time.monotonic(), cpu_s(p.pid)
        path = os.path.join(work, "events.jsonl")
        n, t_end, c_end = 0, None, None
        while time.monotonic() - t0 < 600:
            try:
                with open(path, "rb") as f:
                    n = sum(1 for _ in f)
            except OSError:
                n = 0
            if n >= a.count:
                t_end, c_end = time.monotonic(), cpu_s(p.pid)
                break
            time.sleep(0.05)
        p.terminate()
        p.wait(30)
        if t_end is None:
            print("sim_drain: only %d of %d events arrived" % (n, a.count))
            return 1
        wall = t_end - t0
        print("sim_drain: %d events drained from one simulator change stream in %.1f s: %.0f events/s; "
              "mongocdc CPU %.2f s = %.0f%% of one core" % (a.count, wall, a.count / wall,
                                                           c_end - c0, 100 * (c_end - c0) / wall))
    return 0


if __name__ == "__main__":
    sys.exit(main())
