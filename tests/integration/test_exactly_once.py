"""Exactly-once delivery (exactly.once.support): every change reaches a
read_committed consumer exactly once, through clean restarts, SIGKILLs at any
moment and a second instance started by mistake; the records of aborted
transactions are really in the topics (read_uncommitted sees them) and really
hidden. Runs on the real broker of the suite (transactions need one: the mock
cluster is skipped)."""

import json
import os
import random
import re
import signal
import threading
import time
from pathlib import Path

import pytest

from conftest import Daemon, wait_until
from pipeline_support import (Sim, dataset_docs, dataset_loads, expected_key, key_id_text,
                              log_text, read_topics, wait_log, write_config)


@pytest.fixture
def broker(kafka):
    if kafka.is_mock:
        pytest.skip("transactions need a real broker")
    return kafka


def eos_config(workdir, sim, broker, prefix, name="cfg.yaml", **more):
    opts = {"topic.prefix": prefix, "offsets.storage": "kafka",
            "offsets.topic": prefix + "-offsets", "exactly.once.support": "required",
            "snapshot.max.threads": 2}
    opts.update(more)
    return write_config(workdir, sim.uri, name=name, kafka={"bootstrap.servers": broker.bootstrap},
                        raw=opts)


class Writer(threading.Thread):
    """Inserts, updates ($set v = next version) and deletes documents of
    eos.docs, remembering every version (as test_crash.py's writer)."""

    def __init__(self, client, pause=(0.003, 0.02), seed=7):
        super().__init__(daemon=True)
        self.client = client
        self.pause = pause
        self.rnd = random.Random(seed)
        self.stop_flag = threading.Event()
        self.live = {}
        self.history = []  # (_id, version or "d")
        self.errors = []
        self.next_id = 0

    def step(self):
        coll = self.client.eos.docs
        r = self.rnd.random()
        if r < 0.4 or len(self.live) < 5:
            k = "k%05d" % self.next_id
            self.next_id += 1
            coll.insert_one({"_id": k, "v": 0, "pad": "x" * self.rnd.randint(10, 200)})
            self.live[k] = 0
            self.history.append((k, 0))
        elif r < 0.85:
            k = self.rnd.choice(sorted(self.live))
            self.live[k] += 1
            coll.update_one({"_id": k}, {"$set": {"v": self.live[k]}})
            self.history.append((k, self.live[k]))
        else:
            k = self.rnd.choice(sorted(self.live))
            coll.delete_one({"_id": k})
            del self.live[k]
            self.history.append((k, "d"))

    def run(self):
        while not self.stop_flag.is_set():
            try:
                self.step()
            except Exception as e:  # the simulator is never faulted here
                self.errors.append(repr(e))
                time.sleep(0.1)
            time.sleep(self.rnd.uniform(*self.pause))


def change_counts(recs, topic):
    """(_id, version) -> how many records of topic carry that change."""
    seen = {}
    for r in recs:
        if r.topic != topic or r.op not in ("c", "u", "d"):
            continue
        k = json.loads(key_id_text(r))
        if r.op == "c":
            v = 0
        elif r.op == "u":
            uf = r.updated_fields()
            v = uf.get("v") if uf else r.after()["v"]
        else:
            v = "d"
        seen[(k, v)] = seen.get((k, v), 0) + 1
    return seen


def assert_exactly_once(recs, topic, writer, what):
    seen = change_counts(recs, topic)
    missing = [h for h in writer.history if h not in seen]
    dups = {k: n for k, n in seen.items() if n > 1}
    assert not missing, "%s: changes missing: %s" % (what, missing[:10])
    assert not dups, "%s: changes seen more than once: %s" % (what, list(dups.items())[:10])
    return seen


def test_exactly_once_restart_stream(tmp_workdir, shared_dir, broker, start_mongocdc):
    """Snapshot, streaming, a clean restart: each change once for read_committed;
    the offset is in the offsets topic, committed with the records."""
    prefix = "eos%d" % time.time_ns()
    sim = Sim(tmp_workdir, dataset_loads(shared_dir, only={"sample_mflix.users"}))
    try:
        cfg = eos_config(tmp_workdir, sim, broker, prefix)
        client = sim.client()
        w = Writer(client)
        for _ in range(30):
            w.step()
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "streaming changes from", daemon=d)
        assert "exactly-once delivery: transactional id %s-rs0" % prefix in log_text(tmp_workdir)
        for _ in range(200):
            w.step()
        time.sleep(1.5)
        assert d.stop() == 0
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "streaming changes from", daemon=d)
        for _ in range(200):
            w.step()
        time.sleep(1.5)
        assert d.stop() == 0
        topic = "%s.eos.docs" % prefix
        users = "%s.sample_mflix.users" % prefix
        recs = read_topics(broker.bootstrap, [topic, users], idle_s=3)
        # the first 30 changes were before the snapshot: read as r records
        snap = {json.loads(key_id_text(r)) for r in recs if r.topic == topic and r.op == "r"}
        later = [h for h in w.history[30:]]
        w.history = later
        seen = assert_exactly_once(recs, topic, w, "committed")
        assert snap and len(seen) == len(later)
        want = {expected_key(doc["_id"]) for doc in
                dataset_docs(dataset_loads(shared_dir, only={"sample_mflix.users"})[0][0])}
        rows = [r.key for r in recs if r.topic == users and r.op == "r"]
        assert sorted(rows) == sorted(want), "each users document once as r"
        client.close()
    finally:
        sim.stop()
