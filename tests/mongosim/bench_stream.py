#!/usr/bin/python3
"""Throughput and resume-cost figures of the simulator's change streams (pymongo client).

    /usr/bin/python3 tests/mongosim/bench_stream.py [--events 20000] [--lengths 1000,10000,100000,300000]

1. events/s one collection stream delivers: N inserts are written first (insert_many), then a
   stream opened with startAtOperationTime before them drains all N events.
2. resume cost vs oplog length: the oplog is grown with no-op entries to each length L, then
   an event token near the end is used with resumeAfter; the time of the aggregate plus the
   first event is measured. Positioning is a bisect on the oplog's ts keys, so it must stay
   flat as L grows (not linear).
Prints one JSON object with the figures.
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from mongosim import MongoSim  # noqa: E402


def events_per_second(sim, n):
    c = sim.client()
    coll = c.bench.events
    start = c.admin.command("ping")["operationTime"]
    for i in range(0, n, 1000):
        coll.insert_many([{"_id": i + j, "v": i + j, "s": "payload-%d" % (i + j)} for j in range(min(1000, n - i))])
    t0 = time.perf_counter()
    got = 0
    with coll.watch(start_at_operation_time=start, batch_size=1000, max_await_time_ms=200) as s:
        while got < n:
            s.next()
            got += 1
    dt = time.perf_counter() - t0
    return {"events": n, "seconds": round(dt, 3), "events_per_s": round(n / dt)}


def resume_cost(sim, lengths, repeats=5):
    c = sim.client()
    coll = c.bench.resume
    out = []
    for target in lengths:
        have = sim.control("status")["oplog"]["count"]
        todo = target - have
        while todo > 0:
            k = min(todo, 50000)
            sim.control("write", op="noop", count=k, timeout=120)
            todo -= k
        with coll.watch(max_await_time_ms=100) as s:
            coll.insert_one({"L": target, "k": 1})
            tok = s.next()["_id"]
        coll.insert_one({"L": target, "k": 2})
        best = None
        for _ in range(repeats):
            t0 = time.perf_counter()
            with coll.watch(resume_after=tok, max_await_time_ms=100) as s:
                ev = s.next()
            dt = time.perf_counter() - t0
            assert ev["fullDocument"]["k"] == 2
            best = dt if best is None else min(best, dt)
        out.append({"oplog_entries": sim.control("status")["oplog"]["count"], "resume_ms": round(best * 1000, 2)})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=20000)
    ap.add_argument("--lengths", default="1000,10000,100000,300000")
    a = ap.parse_args()
    with MongoSim(members=1, noop_interval=0, start_timeout=60) as sim:
        rate = events_per_second(sim, a.events)
    with MongoSim(members=1, noop_interval=0, start_timeout=60) as sim:
        res = resume_cost(sim, [int(x) for x in a.lengths.split(",")])
    print(json.dumps({"stream": rate, "resume": res}, indent=1))


if __name__ == "__main__":
    main()
