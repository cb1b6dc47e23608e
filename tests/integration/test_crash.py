"""Crash test: a writer makes a stream of inserts, updates and deletes while
mongocdc is killed with SIGKILL at random moments (during the initial
snapshot and during streaming, 20+ kills), then restarted. At the end the
Kafka topics must hold every change:

  - replaying the topics into a map per key gives the simulator's final
    state (every live document present with its last version, every deleted
    one deleted);
  - every version the writer made after the completed snapshot's start
    position appears as its own event (c for version 0, u with
    updatedFields.v for the others, d for the delete);
  - duplicates are counted and reported (at-least-once allows them only
    after the last committed offset).
"""

import json
import os
import random
import re
import threading
import time

import pytest

from conftest import wait_until
from pipeline_support import (Sim, dataset_docs, dataset_loads, expected_key, key_id_text,
                              log_text, read_topics, write_config)

KILLS = int(os.environ.get("MCDC_CRASH_KILLS", "22"))
SNAPSHOT_KILLS = 6


class Writer(threading.Thread):
    """Inserts, updates ($set v = next version) and deletes documents of
    crash.docs, remembering every version with its operationTime."""

    def __init__(self, client):
        super().__init__(daemon=True)
        self.client = client
        self.stop_flag = threading.Event()
        self.live = {}       # _id -> current version
        self.deleted = set()
        self.history = []    # (_id, version or "d", (sec, inc))
        self.errors = []
        self.next_id = 0

    def run(self):
        coll = self.client.crash.docs
        rnd = random.Random(7)
        with self.client.start_session(causal_consistency=True) as s:
            while not self.stop_flag.is_set():
                try:
                    r = rnd.random()
                    if r < 0.35 or len(self.live) < 5:
                        k = "k%05d" % self.next_id
                        self.next_id += 1
                        coll.insert_one({"_id": k, "v": 0, "pad": "x" * rnd.randint(10, 300)},
                                        session=s)
                        self.live[k] = 0
                        ver = 0
                    elif r < 0.85:
                        k = rnd.choice(sorted(self.live))
                        ver = self.live[k] + 1
                        coll.update_one({"_id": k}, {"$set": {"v": ver}}, session=s)
                        self.live[k] = ver
                    else:
                        k = rnd.choice(sorted(self.live))
                        coll.delete_one({"_id": k}, session=s)
                        del self.live[k]
                        self.deleted.add(k)
                        ver = "d"
                    ot = s.operation_time
                    self.history.append((k, ver, (ot.time, ot.inc) if ot else (0, 0)))
                except Exception as e:  # the simulator is never faulted here
                    self.errors.append(repr(e))
                    time.sleep(0.1)
                time.sleep(rnd.uniform(0.005, 0.03))


def test_crash_sigkill_loop_loses_nothing(tmp_workdir, shared_dir, kafka, start_mongocdc):
    prefix = "crash%d" % int(time.time())
    loads = dataset_loads(shared_dir)  # all of them: the snapshot takes a few seconds
    sim = Sim(tmp_workdir, loads)
    daemons = []
    try:
        cfg = write_config(tmp_workdir, sim.uri, kafka={"bootstrap.servers": kafka.bootstrap},
                           **{"topic.prefix": prefix, "offsets.flush.interval.ms": 500,
                              "snapshot.max.threads": 2})
        client = sim.client()
        writer = Writer(client)
        writer.start()
        rnd = random.Random(11)
        kills = snapshot_kills = 0
        completed_any = False
        t_start = time.monotonic()
        while kills < KILLS and time.monotonic() - t_start < 150:
            d = start_mongocdc("-c", cfg)
            daemons.append(d)
            if kills < SNAPSHOT_KILLS and not completed_any:
                # while the snapshot copies (about 0.3 s here: readers hand documents
                # over in batches; the start is seen up to 0.1 s late)
                wait_until(lambda: "initial snapshot starting" in log_text(tmp_workdir), 30,
                           "the snapshot to start")
                time.sleep(rnd.uniform(0.0, 0.15))
            else:
                time.sleep(rnd.uniform(0.5, 3.0))
            if not d.running():
                pytest.fail("mongocdc exited by itself: %s" % log_text(tmp_workdir)[-3000:])
            run_log = log_text(tmp_workdir)
            in_snapshot = ("initial snapshot starting" in run_log
                           and "snapshot complete" not in run_log)
            completed_any = completed_any or "snapshot complete" in run_log
            d.proc.kill()
            d.proc.wait(timeout=10)
            kills += 1
            snapshot_kills += in_snapshot
            # keep the log of every run: the next start truncates it
            os.rename(tmp_workdir / "mongocdc.stderr", tmp_workdir / ("run%02d.log" % kills))
        writer.stop_flag.set()
        writer.join(timeout=10)
        assert not writer.errors, writer.errors[:3]

        # a final run drains everything and stops cleanly
        d = start_mongocdc("-c", cfg)
        daemons.append(d)
        wait_until(lambda: "snapshot complete" in log_text(tmp_workdir)
                   or "streaming changes from" in log_text(tmp_workdir), 120, "final run streams")
        time.sleep(3)
        assert d.stop(timeout_s=30) == 0

        logs = "".join((tmp_workdir / f).read_text(errors="replace")
                       for f in sorted(os.listdir(tmp_workdir)) if f.startswith("run"))
        logs += log_text(tmp_workdir)
        starts = re.findall(r"initial snapshot starting; streaming will resume from .*?"
                            r"Timestamp\((\d+), (\d+)\)(?:(?!initial snapshot starting).)*?"
                            r"snapshot complete", logs, re.S)
        assert starts, "no completed snapshot in the logs"
        snap_start = (int(starts[-1][0]), int(starts[-1][1]))

        topics = ["%s.crash.docs" % prefix] + ["%s.%s" % (prefix, ns) for _, ns in loads]
        recs = read_topics(kafka.bootstrap, topics, idle_s=5, timeout_s=120)
        docs_recs = [r for r in recs if r.topic == "%s.crash.docs" % prefix]

        # 1. replay per key == final state
        state = {}
        for r in docs_recs:
            k = json.loads(key_id_text(r))
            if r.op in ("d", "tombstone"):
                state.pop(k, None)
            elif r.op in ("r", "c") or (r.op == "u" and r.after() is not None):
                state[k] = r.after()["v"]
        final = {d_["_id"]: d_["v"] for d_ in client.crash.docs.find({}, {"v": 1})}
        assert state == final, "replayed topic differs from the final state: %d vs %d keys" % (
            len(state), len(final))
        assert final == writer.live

        # 2. every version after the snapshot's start is an event of its own
        seen = {}
        for r in docs_recs:
            k = json.loads(key_id_text(r))
            if r.op == "c":
                v = 0
            elif r.op == "u":
                uf = r.updated_fields()
                v = uf.get("v") if uf else r.after()["v"]
            elif r.op == "d":
                v = "d"
            else:
                continue
            seen[(k, v)] = seen.get((k, v), 0) + 1
        missing = [(k, v) for k, v, t in writer.history if t > snap_start and (k, v) not in seen]
        assert not missing, "changes missing from the topic: %s" % missing[:10]
        dups = sum(n - 1 for n in seen.values())
        # the dataset collections: every document once as r (plus replays)
        for path, ns in loads:
            keys = set(r.key for r in recs if r.topic == "%s.%s" % (prefix, ns) and r.op == "r")
            want = set(expected_key(doc["_id"]) for doc in dataset_docs(path))
            assert want <= keys, ns
        print("\nCRASH TEST: %d kills (%d during the snapshot), %d writer changes "
              "(%d after the completed snapshot's start), %d change records in the topic, "
              "%d duplicates, 0 missing" % (kills, snapshot_kills, len(writer.history),
                                            sum(1 for h in writer.history if h[2] > snap_start),
                                            len(docs_recs), dups))
        assert kills >= 20 and snapshot_kills >= 1
        client.close()
    finally:
        for d in daemons:
            if d.running():
                d.proc.kill()
        sim.stop()
