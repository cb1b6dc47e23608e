"""snapshot.resumable: an initial snapshot killed (SIGKILL) part way resumes
from the progress its committed offsets carry (mongocdc_snapshot,
src/snapshot/progress.h) instead of copying everything again.

The simulator delays every getMore and the snapshot reads in small batches
with two readers, so that offsets are committed many times during the copy
and each kill lands in the middle of it. Checked after the last run:

  - every document of every collection appears as an `r` record (at least
    once: records produced after the last commit of a killed run are produced
    again, as at-least-once allows);
  - each run after a kill logged that it resumed, and the run that completed
    copied fewer documents than the collections hold;
  - a collection with `_id`s of every type, split into ranges read by the two
    readers in parallel, was resumed part way (its ranges in the stored
    progress).

Also: one range pair resumed exactly (nothing read twice by the resumed
run), per-shard tasks each resuming their own progress, and stored progress
that no longer fits the plan (a collection dropped) redoing the copy with a
WARN.
"""

import json
import os
import re
import time

from bson import json_util

from conftest import start_sharded_sim
from pipeline_support import (Sim, data_records, dataset_docs, dataset_loads, expected_key,
                              log_text, offsets_value, read_jsonl, wait_log, wait_until,
                              write_config)
from test_snapshot_split import JSON_OPTS, mixed_docs

PREFIX = "it"
MIXED_NS = "mix.aaa_ids"  # first in the plan (collections are copied in name order)
MIXED_DOCS = 3000


def stored_progresses(workdir):
    """The progress members of every stored position (parsed), by offsets key."""
    text = offsets_value(workdir)
    out = {}
    for key, value in (json.loads(text).items() if text else ()):
        if "mongocdc_snapshot" in value:
            out[key] = json.loads(value["mongocdc_snapshot"])
    return out


def stored_progress(workdir):
    """The progress member of the one stored position (parsed), or None."""
    p = stored_progresses(workdir)
    assert len(p) <= 1, p
    return next(iter(p.values()), None)


def n_of(rec):
    return json_util.loads(rec.payload["after"], json_options=JSON_OPTS)["n"]


def kill_mid_snapshot(start_mongocdc, workdir, cfg, run, previous, done_colls):
    """Starts mongocdc, waits until its stored progress moved past previous
    (a commit during this run's copy) with at least done_colls collections
    done, SIGKILLs it and keeps its log. Returns the progress stored at the
    kill."""
    d = start_mongocdc("-c", cfg)

    def moved():
        p = stored_progress(workdir)
        return p if p is not None and p != previous and len(p["done"]) >= done_colls else None

    wait_until(moved, 120, "a commit of the snapshot's progress in run %d" % run, 0.02)
    assert "snapshot complete" not in log_text(workdir), "the copy ended before the kill"
    d.proc.kill()
    d.proc.wait(timeout=10)
    progress = stored_progress(workdir)
    os.rename(workdir / "mongocdc.stderr", workdir / ("run%02d.log" % run))
    return progress


def finish(start_mongocdc, workdir, cfg):
    d = start_mongocdc("-c", cfg)
    wait_until(lambda: "snapshot complete" in log_text(workdir), 300, "the snapshot to complete")
    assert d.stop(timeout_s=30) == 0
    return log_text(workdir)


def copied(log):
    m = re.search(r"snapshot complete: \d+ collections, (\d+) documents", log)
    assert m, log[-3000:]
    return int(m.group(1))


def test_killed_snapshot_resumes_from_committed_progress(tmp_workdir, shared_dir,
                                                         start_mongocdc):
    loads = dataset_loads(shared_dir)
    sim = Sim(tmp_workdir, loads, members=1)
    try:
        c = sim.client()
        c.mix.aaa_ids.insert_many(mixed_docs(MIXED_DOCS))
        c.close()
        sim.control("delay", command="getMore", ms=25)
        cfg = write_config(tmp_workdir, sim.uri, raw={
            "snapshot.resumable": True,
            "snapshot.max.threads": 2,
            "snapshot.fetch.size": 40,
            "snapshot.collection.split.min.documents": 1000,
            "offsets.flush.interval.ms": 50,
        })
        kills, progress, mixed_partial = 3, None, False
        for run in range(1, kills + 1):
            # the first kill inside the first collection (the mixed one), the
            # others further on each time
            progress = kill_mid_snapshot(start_mongocdc, tmp_workdir, cfg, run, progress,
                                         3 * (run - 1))
            mixed_partial |= any(r["ns"] == MIXED_NS and "after" in r
                                 for r in progress.get("ranges", []))
        log = finish(start_mongocdc, tmp_workdir, cfg)

        runs = [(tmp_workdir / ("run%02d.log" % i)).read_text(errors="replace")
                for i in range(2, kills + 1)] + [log]
        for text in runs:
            assert "resuming the initial snapshot: " in text, text[-3000:]
        total = sum(len(dataset_docs(path)) for path, _ in loads) + MIXED_DOCS
        assert copied(log) < total
        assert mixed_partial, "no kill landed inside %s's ranges" % MIXED_NS
        assert "mix.aaa_ids: about %d documents split into 2 _id ranges" % MIXED_DOCS in \
            (tmp_workdir / "run01.log").read_text(errors="replace")

        recs = [r for r in data_records(read_jsonl(tmp_workdir / "events.jsonl"), PREFIX)
                if r.op == "r"]
        mixed = [n_of(r) for r in recs if r.topic == "%s.%s" % (PREFIX, MIXED_NS)]
        assert set(mixed) == set(range(MIXED_DOCS))
        for path, ns in loads:
            keys = set(r.key for r in recs if r.topic == "%s.%s" % (PREFIX, ns))
            want = set(expected_key(doc["_id"]) for doc in dataset_docs(path))
            assert want <= keys, ns
        assert [r.snapshot for r in recs].count("last") == 1
        print("\nRESUME TEST: %d documents, %d r records over %d runs, %d copied by the last "
              "run" % (total, len(recs), kills + 1, copied(log)))
    finally:
        sim.stop()


def test_range_split_across_two_readers_resumes_both(tmp_workdir, start_mongocdc):
    """One collection of mixed `_id` types in two ranges read at once: a kill
    while both are part way stores both "after" keys; the next run continues
    each after its own key and reads the rest exactly once."""
    total = 8000
    sim = Sim(tmp_workdir, members=1)
    try:
        c = sim.client()
        c.big.mixed.insert_many(mixed_docs(total))
        c.close()
        sim.control("delay", command="getMore", ms=25)
        cfg = write_config(tmp_workdir, sim.uri, raw={
            "snapshot.resumable": True,
            "snapshot.max.threads": 2,
            "snapshot.fetch.size": 50,
            "snapshot.collection.split.min.documents": 2000,
            "offsets.flush.interval.ms": 50,
        })
        d = start_mongocdc("-c", cfg)

        def both_partial():
            p = stored_progress(tmp_workdir)
            ranges = p.get("ranges", []) if p else []
            return p if sum("after" in r for r in ranges) == 2 else None

        wait_until(both_partial, 120, "both ranges part way in the stored progress", 0.02)
        assert "snapshot complete" not in log_text(tmp_workdir)
        d.proc.kill()
        d.proc.wait(timeout=10)
        stored = stored_progress(tmp_workdir)
        first = [n_of(r) for r in data_records(read_jsonl(tmp_workdir / "events.jsonl"), PREFIX)
                 if r.op == "r"]
        os.rename(tmp_workdir / "mongocdc.stderr", tmp_workdir / "run01.log")

        log = finish(start_mongocdc, tmp_workdir, cfg)
        assert "resuming the initial snapshot: 0 of 1 collections done, 1 resumed" in log
        assert "snapshot of big.mixed resumes in 2 _id ranges" in log
        recs = [r for r in data_records(read_jsonl(tmp_workdir / "events.jsonl"), PREFIX)
                if r.op == "r"]
        ns = [n_of(r) for r in recs]
        assert set(ns) == set(range(total))
        second = ns[len(first):]
        assert copied(log) == len(second) < total
        # the resumed run reads nothing twice, and re-sends only what the killed
        # run produced after its last commit
        assert len(second) == len(set(second))
        assert len(ns) - total == len(set(first) & set(second))
        assert stored["ranges"][0]["ns"] == "big.mixed"
    finally:
        sim.stop()


def test_per_shard_tasks_resume_their_own_ranges(tmp_workdir, start_mongocdc):
    """Per-shard tasks read only the chunks their shard owns (orphans left on
    shard02 by a migration are skipped) and each keeps its own progress under
    its own offsets key: after a kill during both copies each resumes its own
    ranges, and every document is read (orphans never)."""
    total = 6000
    sim = start_sharded_sim()
    try:
        c = sim.client()
        c.admin.command("enableSharding", "shop")
        c.admin.command("shardCollection", "shop.big", key={"_id": 1})
        c.admin.command("split", "shop.big", middle={"_id": 3000})
        c.admin.command("moveChunk", "shop.big", find={"_id": 4000}, to="shard02")
        c.shop.big.insert_many(mixed_docs(total, maxkey=False))
        sim.control("orphans", keep=True)
        c.admin.command("moveChunk", "shop.big", find={"_id": 4000}, to="shard01")
        c.close()
        sim.control("delay", command="getMore", ms=25)
        cfg = write_config(tmp_workdir, sim.uri, raw={
            "snapshot.resumable": True,
            "snapshot.max.threads": 2,
            "snapshot.fetch.size": 50,
            "snapshot.collection.split.min.documents": 1000,
            "offsets.flush.interval.ms": 50,
        })
        d = start_mongocdc("-c", cfg)

        def shard01_part_way():
            return any(r.get("after") for p in stored_progresses(tmp_workdir).values()
                       for r in p.get("ranges", []))

        wait_until(shard01_part_way, 120, "a shard's progress part way", 0.02)
        d.proc.kill()
        d.proc.wait(timeout=10)
        stored = stored_progresses(tmp_workdir)
        os.rename(tmp_workdir / "mongocdc.stderr", tmp_workdir / "run01.log")

        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "streaming changes from", 120, d, n=2)
        assert d.stop(timeout_s=30) == 0
        log = log_text(tmp_workdir)
        assert log.count("resuming the initial snapshot: ") == len(stored)
        recs = [r for r in data_records(read_jsonl(tmp_workdir / "events.jsonl"), PREFIX)
                if r.op == "r"]
        assert set(n_of(r) for r in recs) == set(range(total))
        assert "orphans skipped" in log
    finally:
        sim.stop()


def test_unusable_progress_redoes_the_copy_with_a_warning(tmp_workdir, start_mongocdc):
    """A collection the stored progress names as copied was dropped meanwhile:
    the progress no longer fits the plan, so the run says why at WARN and
    copies everything again rather than trusting any of it."""
    total = 4000
    sim = Sim(tmp_workdir, members=1)
    try:
        c = sim.client()
        c.big.aaa.insert_many([{"_id": i, "n": i} for i in range(100)])
        c.big.mixed.insert_many(mixed_docs(total))
        sim.control("delay", command="getMore", ms=25)
        cfg = write_config(tmp_workdir, sim.uri, raw={
            "snapshot.resumable": True,
            "snapshot.max.threads": 2,
            "snapshot.fetch.size": 50,
            "offsets.flush.interval.ms": 50,
        })
        d = start_mongocdc("-c", cfg)

        def aaa_done_mixed_part_way():
            p = stored_progress(tmp_workdir)
            return p and p["done"] == ["big.aaa"] and any("after" in r for r in p["ranges"])

        wait_until(aaa_done_mixed_part_way, 120, "big.aaa done and big.mixed part way", 0.02)
        d.proc.kill()
        d.proc.wait(timeout=10)
        os.rename(tmp_workdir / "mongocdc.stderr", tmp_workdir / "run01.log")
        c.big.aaa.drop()
        c.close()

        log = finish(start_mongocdc, tmp_workdir, cfg)
        assert ("WARN  [rs0] the interrupted initial snapshot cannot be resumed: big.aaa, named "
                "in the stored progress, is no longer in the snapshot's plan (dropped, renamed "
                "or excluded); it is redone whole") in log, log[-3000:]
        assert "resuming the initial snapshot" not in log
        assert copied(log) == total  # big.mixed whole again
    finally:
        sim.stop()
