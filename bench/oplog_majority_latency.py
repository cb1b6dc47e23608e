#!/usr/bin/python3
"""oplog_majority_latency: what holding oplog entries until the majority commit point costs
in publish latency when the replica set is healthy (issue "Never publish a write MongoDB
rolls back", figure).

For each replication lag L (both secondaries of a 3-member set apply entries L ms after
they are written: the simulator's `lag` control, so the commit point trails the primary by
about L) and each binary given: mongocdc tails the oplog (capture.mode oplog) into a
JSON-lines file; N single inserts are written one at a time, and the time from each
insert's acknowledgement to its record's line in the file is taken. Figures: median and
95th percentile latency, and the `hello` commands the server answered per entry (the
commit-point reads, plus the driver's monitoring). With --base-bin (a build without the
gate) the difference of the two is the added latency; without it, change-stream mode
(majority-committed by the server) is the reference line.

    bench/oplog_majority_latency.py [--bin build/mongocdc] [--base-bin B] [--count N]
                                    [--lags 0,20,100]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "mongosim"))
from mongosim import MongoSim  # noqa: E402


def tail_ids(path, seen, stop):
    """Records the arrival time of every inserted _id's line in the sink file."""
    while not os.path.exists(path) and not stop.is_set():
        time.sleep(0.001)
    with open(path, "r") as f:
        buf = ""
        while not stop.is_set():
            chunk = f.read()
            if not chunk:
                time.sleep(0.0005)
                continue
            now = time.time()
            buf += chunk
            lines = buf.split("\n")
            buf = lines.pop()
            for line in lines:
                try:
                    rec = json.loads(line)
                    key, value = rec["key"], rec["value"] or {}
                    key = key.get("payload", key)
                    value = value.get("payload", value)
                    if value.get("op") == "c":
                        seen.setdefault(int(json.loads(key["id"])), now)
                except (ValueError, KeyError, TypeError, AttributeError):
                    continue


def run(binary, mode, lag_ms, count):
    work = tempfile.mkdtemp(prefix="oplog_majority.")
    with MongoSim(members=3, noop_interval=10.0) as sim:
        for m in (1, 2):
            if lag_ms:
                sim.control("lag", member=m, ms=lag_ms)
        sink = os.path.join(work, "events.jsonl")
        cfg = os.path.join(work, "cfg.yaml")
        with open(cfg, "w") as f:
            f.write('topic.prefix: bench\nmongodb.connection.string: "%s"\nsnapshot.mode: no_data\n'
                    'debezium.compatibility: "1.9"\ncapture.mode: %s\ncursor.max.await.time.ms: 1000\n'
                    'sink.type: file\nsink.path: "%s"\noffsets.file.path: "%s/off.json"\n'
                    % (sim.uri, mode, sink, work))
        log = open(os.path.join(work, "log"), "wb")
        p = subprocess.Popen([binary, "-c", cfg], stderr=log)
        try:
            deadline = time.time() + 60
            while b"tailing local.oplog.rs" not in open(os.path.join(work, "log"), "rb").read() and \
                    b"streaming changes from" not in open(os.path.join(work, "log"), "rb").read():
                if time.time() > deadline or p.poll() is not None:
                    raise RuntimeError("mongocdc did not start streaming: see %s/log" % work)
                time.sleep(0.05)
            c = sim.client()
            c.bench.w.insert_one({"_id": -1})  # creates the collection
            seen, stop = {}, threading.Event()
            t = threading.Thread(target=tail_ids, args=(sink, seen, stop), daemon=True)
            t.start()
            time.sleep(1.0)
            hello0 = sim.control("counters")["commands"].get("hello", 0)
            acked = {}
            for i in range(count):
                c.bench.w.insert_one({"_id": i, "pad": "x" * 200})
                acked[i] = time.time()
                time.sleep(0.02)
            deadline = time.time() + 60
            while len([i for i in acked if i in seen]) < count and time.time() < deadline:
                time.sleep(0.01)
            hello = sim.control("counters")["commands"].get("hello", 0) - hello0
            stop.set()
            lat = sorted((seen[i] - acked[i]) * 1000.0 for i in acked if i in seen)
        finally:
            p.terminate()
            p.wait(30)
    if not lat:
        return None
    return {"median": statistics.median(lat), "p95": lat[int(0.95 * (len(lat) - 1))],
            "n": len(lat), "hello_per_entry": hello / float(count)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "mongocdc"))
    ap.add_argument("--base-bin", help="a build without the commit-point gate, for the difference")
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--lags", default="0,20,100", help="replication lags to model, ms")
    a = ap.parse_args()
    rows = []
    for lag in [int(x) for x in a.lags.split(",")]:
        runs = [("oplog (gated)", a.bin, "oplog")]
        if a.base_bin:
            runs.append(("oplog (no gate)", a.base_bin, "oplog"))
        runs.append(("change streams", a.bin, "change_streams"))
        for name, binary, mode in runs:
            r = run(binary, mode, lag, a.count)
            rows.append((lag, name, r))
            if r is None:
                print("lag %4d ms  %-16s  no records" % (lag, name), flush=True)
            else:
                print("lag %4d ms  %-16s  median %7.1f ms  p95 %7.1f ms  hello/entry %.2f  (n=%d)"
                      % (lag, name, r["median"], r["p95"], r["hello_per_entry"], r["n"]), flush=True)


if __name__ == "__main__":
    main()
