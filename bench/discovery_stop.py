#!/usr/bin/python3
"""discovery_stop: SIGTERM -> exit time of mongocdc on a simulated sharded
cluster (per-shard mode, mongos seed) while shard discovery cannot read
config.shards (issue #8, figures).

The mongos is made unreachable in one of two ways (simulator controls):
`unreachable` (connections refused: the read fails within the selection
slice) and `black_hole` (connections accepted, never answered: the read waits
for the socket timeout, none by default). After discovery has failed for
--wait seconds, SIGTERM is sent and the time until the process exits is
measured (capped at --cap seconds: then killed, reported as "> cap").

    bench/discovery_stop.py [--bin build/mongocdc] [--repeat 3]
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "mongosim"))
from mongosim import MongoSim  # noqa: E402

CONFIG = """topic.prefix: "bench"
mongodb.connection.string: "{uri}"
cursor.max.await.time.ms: 300
offsets.storage: "file"
offsets.file.path: "{dir}/offsets.json"
offsets.flush.interval.ms: 200
mongodb.poll.interval.ms: 300
log.level: "info"
sink.type: "file"
sink.path: "{dir}/events.jsonl"
"""


def one(binary, how, wait_s, cap_s):
    sim = MongoSim(topology="sharded", shards=2, members=1, noop_interval=0.3)
    sim.start()
    d = tempfile.mkdtemp(prefix="discstop")
    try:
        c = sim.client()
        c.shop.orders.insert_many([{"_id": i} for i in range(10)])
        with open(os.path.join(d, "cfg.yaml"), "w") as f:
            f.write(CONFIG.format(uri=sim.uri, dir=d))
        log = open(os.path.join(d, "log"), "w")
        env = dict(os.environ, MONGOC_DISABLE_SHM="1")
        p = subprocess.Popen([binary, "-c", os.path.join(d, "cfg.yaml")], stdout=log,
                             stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + 60
        while open(os.path.join(d, "log")).read().count("streaming changes from") < 2:
            if time.time() > deadline or p.poll() is not None:
                raise RuntimeError("mongocdc did not start streaming")
            time.sleep(0.1)
        sim.control(how, shard="mongos", member=0)
        time.sleep(wait_s)
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(timeout=cap_s)
            return time.monotonic() - t0, rc
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            return None, None
    finally:
        sim.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "mongocdc"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--wait", type=float, default=3.0)
    ap.add_argument("--cap", type=float, default=40.0)
    a = ap.parse_args()
    for how in ("unreachable", "black_hole"):
        got = [one(a.bin, how, a.wait, a.cap) for _ in range(a.repeat)]
        text = ", ".join("> %.0f s (killed)" % a.cap if t is None else "%.2f s (exit %d)" % (t, rc)
                         for t, rc in got)
        print("%-12s SIGTERM -> exit: %s" % (how, text))


if __name__ == "__main__":
    main()
