#!/usr/bin/python3
"""sharded_bench: mongocdc on a simulated sharded cluster (issue "Sharded
clusters", figures).

Drain runs, per configuration (1, 2 and 4 shard tasks in per-shard mode, and
4 shards through mongos in merged mode): a first mongocdc run stores a
position and stops; N inserts (~1 KB) spread evenly over the shards and N/2
updates are written while it is down; a second run drains them to a
JSON-lines file. Figures: events/s of the drain, mongocdc CPU seconds
(user+sys from /proc) per million events, peak RSS (VmHWM), and the order
gate's added latency p50/p99 per checked event (the daemon logs it at stop)
with no migration running.

Migration run (2 shards, per-shard mode, live): updates to the documents of
one chunk while that chunk moves to the other shard, with the donor's getMore
delayed (simulator `delay`) so its task lags; the gate then holds the moved
documents' events on the recipient until the donor has acknowledged the older
ones. Figure: the gate's added latency p50/p99 per checked event during that
run, and how many events were held.

Each configuration runs --repeat times; the spread (min..max) is printed. The
simulator is Python and shares the machine, so the figures compare
configurations more than they predict a real cluster's throughput.

    bench/sharded_bench.py [--count N] [--repeat R] [--bin build/mongocdc]
"""
import argparse
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
from pymongo import UpdateOne  # noqa: E402

GATE_RE = re.compile(r"order gate: (\d+) events checked, added latency p50 ([\d.]+) us, p99 ([\d.]+) us")
HELD_RE = re.compile(r"order gate: (\d+) events of documents moved from another shard were held, "
                     r"(\d+) ms in all")


def cpu_s(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_kb(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def lines(path):
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def write_cfg(work, uri, merged, extra=""):
    cfg = os.path.join(work, "cfg.yaml")
    with open(cfg, "w") as f:
        f.write('topic.prefix: bench\nmongodb.connection.string: "%s"\nsnapshot.mode: no_data\n'
                'debezium.compatibility: "3.x"\nmongodb.connection.mode: %s\n'
                'cursor.max.await.time.ms: 300\n'
                'sink.type: file\nsink.path: "%s/events.jsonl"\noffsets.file.path: "%s/off.json"\n'
                'offsets.flush.interval.ms: 200\nlog.level: info\n%s'
                % (uri, "sharded" if merged else "replica_set", work, work, extra))
    return cfg


def shard_collection(c, shards, count):
    """bench.w sharded on _id, one chunk of count/shards documents per shard."""
    c.admin.command("enableSharding", "bench")
    c.admin.command("shardCollection", "bench.w", key={"_id": 1})
    per = count // shards
    for k in range(1, shards):
        c.admin.command("split", "bench.w", middle={"_id": k * per})
        c.admin.command("moveChunk", "bench.w", find={"_id": k * per}, to="shard%02d" % (k + 1))


def gate_figures(log_text):
    out = []
    for m in GATE_RE.finditer(log_text):
        out.append((int(m.group(1)), float(m.group(2)), float(m.group(3))))
    held = [(int(m.group(1)), int(m.group(2))) for m in HELD_RE.finditer(log_text)]
    return out, (sum(h[0] for h in held), sum(h[1] for h in held))


def drain(binary, shards, merged, count):
    work = tempfile.mkdtemp(prefix="sharded_bench.")
    with MongoSim(topology="sharded", shards=shards, members=1, noop_interval=0.5,
                  start_timeout=60) as sim:
        c = sim.client()
        shard_collection(c, shards, count)
        cfg = write_cfg(work, sim.uri, merged)
        logp = os.path.join(work, "log")
        log = open(logp, "wb")
        p = subprocess.Popen([binary, "-c", cfg], stderr=log)
        want = 1 if merged else shards
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60:
            if open(logp, "rb").read().count(b"streaming changes from") >= want:
                break
            time.sleep(0.1)
        time.sleep(1.0)
        p.terminate()
        p.wait(30)
        pad = "x" * 900
        for i in range(0, count, 500):
            c.bench.w.insert_many([{"_id": j, "pad": pad, "n": 0}
                                   for j in range(i, min(count, i + 500))])
        ups = [UpdateOne({"_id": j}, {"$set": {"n": 1}}) for j in range(0, count, 2)]
        for i in range(0, len(ups), 500):
            c.bench.w.bulk_write(ups[i:i + 500])
        total = count + (count + 1) // 2
        path = os.path.join(work, "events.jsonl")
        if os.path.exists(path):
            os.unlink(path)
        open(logp, "wb").close()
        log = open(logp, "wb")
        p = subprocess.Popen([binary, "-c", cfg], stderr=log)
        t0, c0 = time.monotonic(), cpu_s(p.pid)
        t_end = c_end = None
        rss = 0
        while time.monotonic() - t0 < 900:
            if lines(path) >= total:
                t_end, c_end, rss = time.monotonic(), cpu_s(p.pid), peak_rss_kb(p.pid)
                break
            time.sleep(0.05)
        p.terminate()
        p.wait(30)
        log.close()
        if t_end is None:
            print("  only %d of %d events arrived" % (lines(path), total))
            return None
        gates, _ = gate_figures(open(logp).read())
        return {"eps": total / (t_end - t0), "cpu": (c_end - c0) * 1e6 / total,
                "rss": rss / 1024.0, "gate": gates, "total": total}


def migration(binary, updates):
    """Live run: updates to one chunk's documents while it moves, donor lagging."""
    work = tempfile.mkdtemp(prefix="sharded_bench_mig.")
    with MongoSim(topology="sharded", shards=2, members=1, noop_interval=0.3,
                  start_timeout=60) as sim:
        c = sim.client()
        shard_collection(c, 2, 2000)
        c.bench.w.insert_many([{"_id": j, "n": 0} for j in range(2000)])
        cfg = write_cfg(work, sim.uri, False)
        logp = os.path.join(work, "log")
        log = open(logp, "wb")
        p = subprocess.Popen([binary, "-c", cfg], stderr=log)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60:
            if open(logp, "rb").read().count(b"streaming changes from") >= 2:
                break
            time.sleep(0.1)
        # Documents [0, 1000) live on shard01; shard01's task lags behind.
        sim.control("delay", shard="shard01", command="getMore", ms=300)
        half = updates // 2
        for k in range(half):
            c.bench.w.update_one({"_id": k % 1000}, {"$inc": {"n": 1}})
        c.admin.command("moveChunk", "bench.w", find={"_id": 0}, to="shard02")
        for k in range(half, updates):
            c.bench.w.update_one({"_id": k % 1000}, {"$inc": {"n": 1}})
        path = os.path.join(work, "events.jsonl")
        t1 = time.monotonic()
        while time.monotonic() - t1 < 300 and lines(path) < updates:
            time.sleep(0.1)
        sim.control("delay", shard="shard01", command="getMore", ms=0)
        time.sleep(1.0)
        p.terminate()
        p.wait(30)
        log.close()
        gates, held = gate_figures(open(logp).read())
        return {"gate": gates, "held": held, "arrived": lines(path)}


def spread(vals, fmt):
    return (fmt % min(vals)) + ".." + (fmt % max(vals)) if len(vals) > 1 else fmt % vals[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--updates", type=int, default=400)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "mongocdc"))
    ap.add_argument("--configs", default="1,2,4,4m",
                    help="shard counts to drain, 'm' = merged through mongos; '' = none")
    ap.add_argument("--no-migration", action="store_true")
    a = ap.parse_args()
    ok = True
    configs = [(int(x.rstrip("m")), x.endswith("m")) for x in a.configs.split(",") if x]
    for shards, merged in configs:
        runs = [r for r in (drain(a.bin, shards, merged, a.count) for _ in range(a.repeat)) if r]
        ok = ok and len(runs) == a.repeat
        if not runs:
            continue
        p50 = [g[1] for r in runs for g in r["gate"]]
        p99 = [g[2] for r in runs for g in r["gate"]]
        print("%d shard%s %-9s %d events: %s events/s, %s CPU-s per million events, peak RSS %s MiB%s"
              % (shards, "s" if shards > 1 else " ", "merged" if merged else "per-shard", runs[0]["total"],
                 spread([r["eps"] for r in runs], "%.0f"), spread([r["cpu"] for r in runs], "%.1f"),
                 spread([r["rss"] for r in runs], "%.1f"),
                 "; gate p50 %s us, p99 %s us" % (spread(p50, "%.1f"), spread(p99, "%.1f")) if p50 else ""))
        sys.stdout.flush()
    for _ in range(0 if a.no_migration else a.repeat):
        m = migration(a.bin, a.updates)
        p50 = [g[1] for g in m["gate"]]
        p99 = [g[2] for g in m["gate"]]
        print("migration (2 shards, donor getMore +300 ms, %d updates, %d arrived): %d events held "
              "%d ms in all; gate p50 per task %s us, p99 per task %s us"
              % (a.updates, m["arrived"], m["held"][0], m["held"][1],
                 ", ".join("%.1f" % v for v in p50),
                 ", ".join("%.1f" % v for v in p99)))
        sys.stdout.flush()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
