"""capture.mode oplog end to end on the simulator: Debezium 1.9's oplog events
(patch/filter, h/tord/stxnid), $v: 2 diffs decoded into the $v: 1 form and
checked by applying them to the pre-image, transactions (also split into
partialTxn chains), history lost at start, the capture-mode migration table
and a restart after SIGKILL.

The file sink stands in for Kafka (each record line holds key and value bytes).
"""

import copy
import hashlib
import json
import time
import uuid

import pytest
from bson.timestamp import Timestamp

from conftest import wait_until
from pipeline_support import (Sim, data_records, log_text, offsets_value, read_jsonl,
                              stream_records, wait_log, write_config)

PREFIX = "it"


def oplog_cfg(workdir, uri, name="cfg.yaml", sink=None, **opts):
    base = {"capture.mode": "oplog", "debezium.compatibility": "1.9", "snapshot.mode": "no_data"}
    base.update(opts)
    return write_config(workdir, uri, name=name, sink_path=sink, **base)


def _set_path(doc, path, value):
    parts = path.split(".")
    cur = doc
    for p in parts[:-1]:
        cur = cur[int(p)] if isinstance(cur, list) else cur.setdefault(p, {})
    last = parts[-1]
    if isinstance(cur, list):
        i = int(last)
        while len(cur) <= i:
            cur.append(None)
        cur[i] = value
    else:
        cur[last] = value


def _unset_path(doc, path):
    parts = path.split(".")
    cur = doc
    for p in parts[:-1]:
        cur = cur[int(p)] if isinstance(cur, list) else cur[p]
    if isinstance(cur, list):
        cur[int(parts[-1])] = None
    else:
        cur.pop(parts[-1], None)


def _get_path(doc, path):
    cur = doc
    for p in path.split("."):
        cur = cur[int(p)] if isinstance(cur, list) else cur[p]
    return cur


def apply_v1(pre, patch):
    """Applies a $v: 1 oplog patch ($set/$unset with dotted paths) the way a
    MongoDB 4.4 secondary would, then the truncations mongocdc writes as
    $push {$each: [], $slice: n} (keep the first n elements)."""
    doc = copy.deepcopy(pre)
    for path, v in patch.get("$set", {}).items():
        _set_path(doc, path, v)
    for path in patch.get("$unset", {}):
        _unset_path(doc, path)
    for path, spec in patch.get("$push", {}).items():
        assert spec["$each"] == [] and set(spec) == {"$each", "$slice"}, spec
        arr = _get_path(doc, path)
        del arr[spec["$slice"]:]
    return doc


def _conflict_free(patch):
    """No path of one operator is a prefix of (or equal to) one of another:
    then the patch is a single MongoDB update."""
    paths = [(op, p) for op in ("$set", "$unset", "$push") for p in patch.get(op, {})]
    return not any(o1 != o2 and (p1 == p2 or p2.startswith(p1 + "."))
                   for o1, p1 in paths for o2, p2 in paths)


def test_oplog_events_and_v2_diffs_decode_to_v1(tmp_workdir, start_mongocdc):
    sim = Sim(tmp_workdir, (), extra=("--server-version", "6.0"))
    try:
        cfg = oplog_cfg(tmp_workdir, sim.uri)
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "tailing local.oplog.rs", 30, d)
        c = sim.client()
        coll = c.itdb.docs
        coll.insert_one({"_id": 1, "a": 1, "note": "x", "addr": {"zip": "1", "geo": {"lat": 1}},
                         "items": [{"q": 1}, {"q": 2}], "tags": ["a"]})
        updates = [
            {"$set": {"a": 2}, "$unset": {"note": ""}},
            {"$set": {"addr.zip": "0151", "addr.geo.alt": 3}, "$unset": {"addr.geo.lat": ""}},
            {"$set": {"items.0.q": 5}, "$push": {"tags": "b"}},
            {"$set": {"items.1": {"q": 9, "r": 1}}, "$inc": {"a": 1}},
            {"$set": {"new": {"deep": [1, 2]}}},
            # a modifier that shrinks an array ($pop) is logged as the whole array
            {"$pop": {"tags": 1}},
            {"$push": {"tags": {"$each": ["c", "d", "e"]}}},
            # array truncations (the diff's `l`) come from pipeline updates, whose
            # diff is computed from the documents: a plain truncation, one with
            # element changes (a pull from the middle), a nested array, to empty
            [{"$set": {"tags": {"$literal": ["c", "d"]}}}],
            [{"$set": {"tags": {"$literal": ["c", "x", "d", "e"]}}}],  # grows: no l
            [{"$set": {"tags": {"$literal": ["c", "d", "e"]}}}],
            {"$set": {"items.0.q": [1, 2, 3]}},
            [{"$set": {"items": {"$literal": [{"q": [1, 2]}, {"q": 9, "r": 1}]}}}],
            [{"$set": {"tags": {"$literal": []}}}],
        ]
        states = [coll.find_one({"_id": 1})]
        for u in updates:
            coll.update_one({"_id": 1}, u)
            states.append(coll.find_one({"_id": 1}))
        coll.replace_one({"_id": 1}, {"b": 1})
        coll.delete_one({"_id": 1})
        c.itdb.other.insert_one({"_id": "o"})  # another collection
        n = 1 + len(updates) + 2 + 1
        wait_until(lambda: len(stream_records(tmp_workdir)) >= n, 30, "%d events" % n)
        recs = stream_records(tmp_workdir)
        ins = recs[0]
        assert ins.op == "c" and json.loads(ins.payload["after"])["a"] == 1
        assert ins.payload["patch"] is None and ins.payload["filter"] is None
        src = ins.payload["source"]
        assert list(src) == ["version", "connector", "name", "ts_ms", "snapshot", "db",
                             "sequence", "rs", "collection", "ord", "h", "tord", "stxnid",
                             "lsid", "txnNumber"]
        # A 6.0 oplog entry has no h: 1.9 reads it with getLong("h") and prints null.
        entry = c.local["oplog.rs"].find_one({"op": "i", "ns": "itdb.docs"})
        assert "h" not in entry
        # pymongo's writes are retryable: the entry carries the session, and
        # 1.9 gives it a stxnid (Java UUID.nameUUIDFromBytes of lsid.id, then
        # ":<txnNumber>") though it is no transaction (no tord).
        assert isinstance(entry["stmtId"], int) and entry["prevOpTime"]["t"] == -1
        lsid_bytes = entry["lsid"]["id"].bytes
        want = "%s:%d" % (uuid.UUID(bytes=hashlib.md5(lsid_bytes).digest(), version=3),
                          entry["txnNumber"])
        assert src["h"] is None and src["tord"] is None and src["stxnid"] == want, src
        for i, u in enumerate(updates):
            r = recs[1 + i]
            assert r.op == "u" and r.payload["after"] is None
            patch = json.loads(r.payload["patch"])
            assert patch["$v"] == 1, patch
            assert json.loads(r.payload["filter"]) == {"_id": 1}
            assert apply_v1(states[i], patch) == states[i + 1], (u, patch)
            if "$push" in patch and _conflict_free(patch):
                # the same patch as a MongoDB update on a copy of the pre-image
                scratch = c.itdb.scratch
                scratch.replace_one({"_id": 1}, states[i], upsert=True)
                scratch.update_one({"_id": 1}, {k: v for k, v in patch.items() if k != "$v"})
                assert scratch.find_one({"_id": 1}) == states[i + 1], (u, patch)
        truncations = [json.loads(r.payload["patch"]) for r in recs[1:1 + len(updates)]
                       if "$push" in json.loads(r.payload["patch"])]
        assert len(truncations) == 4, truncations
        assert {"items.0.q": {"$each": [], "$slice": 2}} in [t["$push"] for t in truncations]
        rep = recs[1 + len(updates)]
        assert rep.op == "u" and json.loads(rep.payload["patch"]) == {"_id": 1, "b": 1}
        dele = recs[2 + len(updates)]
        assert dele.op == "d" and json.loads(dele.payload["filter"]) == {"_id": 1}
        assert recs[-1].payload["source"]["collection"] == "other"
        stored = list(json.loads(offsets_value(tmp_workdir)).values())[0]
        assert stored["mongocdc_capture_mode"] == "oplog" and "resume_token" not in stored
        assert "h" in stored and stored["h"] is None
        assert d.stop(timeout_s=30) == 0
        # 1.9's offset of a retryable write carries its stxnid (SourceInfo.lastOffset);
        # a no-op entry's position has none
        stored = list(json.loads(offsets_value(tmp_workdir)).values())[0]
        at = c.local["oplog.rs"].find_one({"ts": Timestamp(stored["sec"], stored["ord"])})
        want = _java_stxnid(at) if at["op"] in ("i", "u", "d") else None
        assert stored.get("stxnid") == want, (stored, at)
        assert at["op"] == "n" or want is not None
        c.close()
    finally:
        sim.stop()


def test_oplog_raw_diff_option_and_truncation(tmp_workdir, start_mongocdc):
    sim = Sim(tmp_workdir, ())
    try:
        cfg = oplog_cfg(tmp_workdir, sim.uri, **{"oplog.update.raw.diff": True})
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "tailing local.oplog.rs", 30, d)
        c = sim.client()
        c.itdb.raw.insert_one({"_id": 1, "a": 1})
        c.itdb.raw.update_one({"_id": 1}, {"$set": {"a": 2}})
        wait_until(lambda: len(stream_records(tmp_workdir)) >= 2, 30, "2 events")
        patch = json.loads(stream_records(tmp_workdir)[1].payload["patch"])
        assert patch["$v"] == 2 and patch["diff"] == {"u": {"a": 2}}
        assert d.stop(timeout_s=30) == 0
        c.close()
    finally:
        sim.stop()


def test_oplog_v1_updates_on_4_4(tmp_workdir, start_mongocdc):
    sim = Sim(tmp_workdir, (), extra=("--server-version", "4.4"))
    try:
        cfg = oplog_cfg(tmp_workdir, sim.uri)
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "tailing local.oplog.rs", 30, d)
        c = sim.client()
        c.itdb.v1.insert_one({"_id": 1, "a": 1})
        c.itdb.v1.update_one({"_id": 1}, {"$set": {"a": 2}})
        wait_until(lambda: len(stream_records(tmp_workdir)) >= 2, 30, "2 events")
        patch = json.loads(stream_records(tmp_workdir)[1].payload["patch"])
        assert patch.get("$v") == 1 and patch["$set"] == {"a": 2}
        assert d.stop(timeout_s=30) == 0
        c.close()
    finally:
        sim.stop()


@pytest.mark.parametrize("split", [0, 1])
def test_oplog_transactions(tmp_workdir, start_mongocdc, split):
    sim = Sim(tmp_workdir, ())
    try:
        if split:
            sim.control("txn_split", ops_per_entry=split)  # a partialTxn chain
        cfg = oplog_cfg(tmp_workdir, sim.uri, **{"provide.transaction.metadata": True})
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "tailing local.oplog.rs", 30, d)
        c = sim.client()
        c.itdb.t.insert_one({"_id": 0})
        with c.start_session() as s:
            with s.start_transaction():
                c.itdb.t.insert_one({"_id": 1}, session=s)
                c.itdb.t.update_one({"_id": 0}, {"$set": {"x": 1}}, session=s)
                c.itdb.t.delete_one({"_id": 1}, session=s)
        wait_until(lambda: len(stream_records(tmp_workdir)) >= 4, 30, "4 events")
        time.sleep(0.5)
        plain = stream_records(tmp_workdir)[0]
        # a retryable write: a stxnid (as 1.9 gives it) but no tord and no BEGIN/END
        assert plain.payload["source"]["tord"] is None and plain.payload["source"]["stxnid"]
        txn = stream_records(tmp_workdir)[1:]
        assert [r.op for r in txn] == ["c", "u", "d"]
        assert [r.payload["source"]["tord"] for r in txn] == [1, 2, 3]
        ids = {r.payload["source"]["stxnid"] for r in txn}
        assert len(ids) == 1 and None not in ids
        assert len({(r.payload["source"]["ts_ms"], r.payload["source"]["ord"]) for r in txn}) == 1
        marks = [r.value for r in read_jsonl(tmp_workdir / "events.jsonl")
                 if r.topic == PREFIX + ".transaction"]
        assert [m["status"] for m in marks] == ["BEGIN", "END"]
        assert marks[0]["id"] == txn[0].payload["source"]["stxnid"]
        assert marks[1]["event_count"] == 3
        assert d.stop(timeout_s=30) == 0
        c.close()
    finally:
        sim.stop()


OFFSET_KEY = '["it",{"rs":"rs0","server_id":"it"}]'


def write_offsets(workdir, value):
    (workdir / "offsets.json").write_text(json.dumps({OFFSET_KEY: value}) + "\n")


def stored_value(workdir):
    return list(json.loads(offsets_value(workdir)).values())[0]


def key_ids(recs):
    return [json.loads(json.loads(r.key)["id"]) for r in recs]


@pytest.mark.parametrize("mode", ["when_needed", "initial", "never"])
def test_oplog_history_lost_at_start(tmp_workdir, start_mongocdc, run_mongocdc, mode):
    sim = Sim(tmp_workdir, ())
    try:
        c = sim.client()
        c.itdb.h.insert_one({"_id": "kept"})
        cfg = oplog_cfg(tmp_workdir, sim.uri, name="run1.yaml")
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "tailing local.oplog.rs", 30, d)
        c.itdb.h.insert_one({"_id": "first"})
        wait_until(lambda: len(stream_records(tmp_workdir)) >= 1, 30, "first")
        assert d.stop(timeout_s=30) == 0
        for i in range(10):
            c.itdb.h.insert_one({"_id": "gone%d" % i})
        sim.control("truncate_oplog", keep=3)
        cfg2 = oplog_cfg(tmp_workdir, sim.uri, name="run2.yaml",
                         sink=tmp_workdir / "run2.jsonl", **{"snapshot.mode": mode})
        if mode == "never":
            r = run_mongocdc("-c", cfg2, timeout_s=60)
            assert r.returncode == 1
            err = r.stderr.decode(errors="replace")
            assert "no longer in the oplog" in err and "snapshot.mode" in err, err[-2000:]
            return
        d2 = start_mongocdc("-c", cfg2)
        wait_log(tmp_workdir, "snapshot complete", 60, d2)
        log = log_text(tmp_workdir)
        assert "history lost" in log and "no longer in the oplog" in log
        warn = next(l for l in log.splitlines() if "history lost on" in l)
        assert warn.count("no longer in the oplog") == 1, warn  # said once, not echoed
        snap = [r for r in data_records(read_jsonl(tmp_workdir / "run2.jsonl"), PREFIX)
                if r.op == "r"]
        assert len(snap) == 12  # kept, first, gone0..9: a new snapshot, not a skipped gap
        assert d2.stop(timeout_s=30) == 0
    finally:
        sim.stop()


def _txn_commit_ts(c):
    e = list(c.local["oplog.rs"].find({"op": "c", "o.applyOps": {"$exists": True}}).sort(
        "$natural", -1).limit(1))[0]
    return e["ts"]


@pytest.mark.parametrize("mode", ["oplog", "change_streams"])
def test_resume_inside_a_transaction_skips_only_emitted_ops(tmp_workdir, start_mongocdc, mode):
    """A stored oplog position with tord 2 inside a 3-operation transaction:
    oplog capture and the switch to change streams both emit only the third
    operation, then everything after (migration table rows 'all oplog')."""
    sim = Sim(tmp_workdir, ())
    try:
        c = sim.client()
        with c.start_session() as s:
            with s.start_transaction():
                for i in range(3):
                    c.itdb.tx.insert_one({"_id": i}, session=s)
        ts = _txn_commit_ts(c)
        c.itdb.tx.insert_one({"_id": "after"})
        write_offsets(tmp_workdir, {"sec": ts.time, "ord": ts.inc, "h": 0, "tord": 2,
                                    "mongocdc_capture_mode": "oplog"})
        cfg = oplog_cfg(tmp_workdir, sim.uri, **{"capture.mode": mode})
        d = start_mongocdc("-c", cfg)
        wait_until(lambda: len(stream_records(tmp_workdir)) >= 2, 30, "2 events")
        time.sleep(1.0)
        assert key_ids(stream_records(tmp_workdir)) == [2, "after"]
        if mode == "change_streams":
            assert "written by oplog capture: switching to change streams" in log_text(tmp_workdir)
            wait_until(lambda: "resume_token" in stored_value(tmp_workdir), 10, "token stored")
        assert d.stop(timeout_s=30) == 0
    finally:
        sim.stop()


def test_oplog_offsets_then_change_streams_no_duplicate(tmp_workdir, start_mongocdc):
    sim = Sim(tmp_workdir, ())
    try:
        c = sim.client()
        d = start_mongocdc("-c", oplog_cfg(tmp_workdir, sim.uri, name="run1.yaml"))
        wait_log(tmp_workdir, "tailing local.oplog.rs", 30, d)
        c.itdb.m.insert_one({"_id": "a"})
        c.itdb.m.insert_one({"_id": "b"})
        wait_until(lambda: len(stream_records(tmp_workdir)) >= 2, 30, "2 events")
        assert d.stop(timeout_s=30) == 0
        assert stored_value(tmp_workdir)["mongocdc_capture_mode"] == "oplog"
        c.itdb.m.insert_one({"_id": "c"})
        cfg2 = oplog_cfg(tmp_workdir, sim.uri, name="run2.yaml", sink=tmp_workdir / "run2.jsonl",
                         **{"capture.mode": "change_streams"})
        d2 = start_mongocdc("-c", cfg2)
        wait_until(lambda: len(stream_records(tmp_workdir / "run2.jsonl")) >= 1, 30, "c")
        time.sleep(1.0)
        assert key_ids(stream_records(tmp_workdir / "run2.jsonl")) == ["c"]
        assert d2.stop(timeout_s=30) == 0
    finally:
        sim.stop()


def test_change_stream_offsets_with_oplog_mode_keep_change_streams(tmp_workdir, start_mongocdc):
    sim = Sim(tmp_workdir, ())
    try:
        c = sim.client()
        cfg1 = oplog_cfg(tmp_workdir, sim.uri, name="run1.yaml",
                         **{"capture.mode": "change_streams"})
        d = start_mongocdc("-c", cfg1)
        wait_log(tmp_workdir, "streaming changes from", 30, d)
        c.itdb.k.insert_one({"_id": "a"})
        wait_until(lambda: len(stream_records(tmp_workdir)) >= 1, 30, "a")
        assert d.stop(timeout_s=30) == 0
        c.itdb.k.insert_one({"_id": "b"})
        cfg2 = oplog_cfg(tmp_workdir, sim.uri, name="run2.yaml", sink=tmp_workdir / "run2.jsonl")
        d2 = start_mongocdc("-c", cfg2)
        wait_until(lambda: len(stream_records(tmp_workdir / "run2.jsonl")) >= 1, 30, "b")
        time.sleep(0.5)
        assert key_ids(stream_records(tmp_workdir / "run2.jsonl")) == ["b"]
        log = log_text(tmp_workdir)
        assert log.count("was written by change streams: capture keeps using change streams") == 1
        assert "resume_token" in stored_value(tmp_workdir)
        assert d2.stop(timeout_s=30) == 0
    finally:
        sim.stop()


def test_oplog_repeated_sigkill_loses_nothing(tmp_workdir, start_mongocdc):
    sim = Sim(tmp_workdir, ())
    try:
        c = sim.client()
        n_total = 0
        sinks = []
        for run in range(4):
            sink = tmp_workdir / ("run%d.jsonl" % run)
            sinks.append(sink)
            cfg = oplog_cfg(tmp_workdir, sim.uri, name="run%d.yaml" % run, sink=sink,
                            **{"offsets.flush.interval.ms": 300})
            d = start_mongocdc("-c", cfg)
            wait_log(tmp_workdir, "tailing local.oplog.rs", 30, d)
            for i in range(30):
                c.itdb.kill.insert_one({"_id": n_total})
                n_total += 1
                if i % 10 == 0:
                    with c.start_session() as s:
                        with s.start_transaction():
                            c.itdb.kill.insert_one({"_id": n_total}, session=s)
                            c.itdb.kill.insert_one({"_id": n_total + 1}, session=s)
                    n_total += 2
                time.sleep(0.01)
            time.sleep(0.3 * run)
            if run < 3:
                d.proc.kill()
                d.proc.wait(timeout=10)
            else:
                wait_until(lambda: len(stream_records(sink)) > 0 and
                           max(key_ids(stream_records(sink))) == n_total - 1, 60,
                           "the last insert")
                assert d.stop(timeout_s=30) == 0
        seen = set()
        for s in sinks:
            seen.update(key_ids(stream_records(s)))
        lost = set(range(n_total)) - seen
        print("oplog SIGKILL x3: %d inserts, %d lost" % (n_total, len(lost)))
        assert not lost, "lost after SIGKILL: %s" % sorted(lost)[:20]
    finally:
        sim.stop()


def test_oplog_stepdown_dropped_connections_and_killed_cursors_lose_nothing(tmp_workdir,
                                                                           start_mongocdc):
    from test_faults import insert_retrying
    sim = Sim(tmp_workdir, ())
    try:
        cfg = oplog_cfg(tmp_workdir, sim.uri, **{"mongodb.server.selection.timeout.ms": 1000,
                                                 "connect.backoff.initial.delay.ms": 250,
                                                 "connect.backoff.max.delay.ms": 1000,
                                                 "connect.max.attempts": 40})
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "tailing local.oplog.rs", 30, d)
        c = sim.client(retryWrites=True)
        coll = c.itdb.faults
        n = 0

        def batch(k):
            nonlocal n
            for _ in range(k):
                insert_retrying(coll, {"_id": n})
                n += 1

        batch(20)
        sim.control("stepdown", no_primary_ms=1500)
        batch(20)
        sim.control("drop_connections")
        batch(20)
        sim.control("kill_cursors")
        batch(20)
        wait_until(lambda: set(key_ids(stream_records(tmp_workdir))) >= set(range(n)),
                   90, "all %d inserts" % n)
        assert d.running()
        assert d.stop(timeout_s=30) == 0
        c.close()
    finally:
        sim.stop()


@pytest.mark.parametrize("mode", ["when_needed", "never"])
def test_oplog_capped_position_lost_while_tailing(tmp_workdir, start_mongocdc, mode):
    """The oplog wraps past the open cursor (getMore fails with 136
    CappedPositionLost): history lost, handled by snapshot.mode."""
    sim = Sim(tmp_workdir, ())
    try:
        c = sim.client()
        c.itdb.cap.insert_one({"_id": "seed"})
        cfg = oplog_cfg(tmp_workdir, sim.uri, **{"snapshot.mode": mode})
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "tailing local.oplog.rs", 30, d)
        c.itdb.cap.insert_one({"_id": "first"})
        wait_until(lambda: len(stream_records(tmp_workdir)) >= 1, 30, "first")
        sim.control("delay", command="getMore", ms=2500)
        time.sleep(0.5)  # the next getMore is now held
        for i in range(10):
            c.itdb.cap.insert_one({"_id": "gone%d" % i})
        sim.control("truncate_oplog", keep=2)
        sim.control("delay", command="getMore", ms=0)
        if mode == "never":
            wait_until(lambda: not d.running(), 30, "exit")
            assert d.proc.returncode == 1
            assert "no longer in the oplog" in log_text(tmp_workdir)
            return
        wait_log(tmp_workdir, "history lost", 60, d)
        # when_needed snapshotted at the first start (no offsets); the second
        # snapshot copies what is left after the lost range
        wait_until(lambda: log_text(tmp_workdir).count("snapshot complete") >= 2, 60,
                   "the second snapshot")
        snap = [r for r in data_records(read_jsonl(tmp_workdir / "events.jsonl"), PREFIX)
                if r.op == "r"]
        assert len(snap) == 1 + 12
        assert d.stop(timeout_s=30) == 0
    finally:
        sim.stop()


@pytest.mark.parametrize("literal", [False, True])
def test_oplog_filters_go_into_the_server_query(tmp_workdir, start_mongocdc, literal):
    """collection.include.list and skipped.operations are in the find's
    filter: entries of other collections and skipped operations never reach
    mongocdc (the events it reads count only what the server returned)."""
    import re
    sim = Sim(tmp_workdir, (), extra=("--noop-interval", "0"))
    try:
        opts = {"collection.include.list": "itdb.keep" if literal else "itdb\\.ke+p",
                "skipped.operations": "u"}
        if literal:
            opts["filters.match.mode"] = "literal"
        cfg = oplog_cfg(tmp_workdir, sim.uri, **opts)
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "tailing local.oplog.rs", 30, d)
        c = sim.client()
        for i in range(20):
            c.itdb.drop.insert_one({"_id": i})
            c.itdb.keeper.insert_one({"_id": i})
        c.itdb.keep.insert_one({"_id": "k"})
        c.itdb.keep.update_one({"_id": "k"}, {"$set": {"a": 1}})
        c.itdb.keep.delete_one({"_id": "k"})
        wait_until(lambda: len(stream_records(tmp_workdir)) >= 2, 30, "2 events")
        time.sleep(1.0)
        recs = stream_records(tmp_workdir)
        assert [(r.op, r.payload["source"]["collection"]) for r in recs] == [
            ("c", "keep"), ("d", "keep")]
        assert d.stop(timeout_s=30) == 0
        m = re.search(r"(\d+) events read, (\d+) records produced, (\d+) skipped",
                      log_text(tmp_workdir))
        assert m, log_text(tmp_workdir)[-1500:]
        read, skipped = int(m.group(1)), int(m.group(3))
        # 40 inserts elsewhere and the skipped update were filtered by the server
        assert read <= 2 + 5 and skipped <= 5, (read, skipped)
    finally:
        sim.stop()


def _java_stxnid(entry):
    """1.9's SourceInfo.extractSessionTxnId of an oplog entry: Java
    UUID.nameUUIDFromBytes of lsid.id's bytes (the 5.0 driver hands it over as
    Binary) and ":<txnNumber>"; None for an entry outside a session write."""
    if "txnNumber" not in entry or entry.get("h"):
        return None
    return "%s:%d" % (uuid.UUID(bytes=hashlib.md5(entry["lsid"]["id"].bytes).digest(), version=3),
                      entry["txnNumber"])


@pytest.mark.parametrize("capture,retryable", [("oplog", True), ("oplog", False),
                                               ("change_streams_update_full", True)])
def test_snapshot_records_carry_the_newest_entrys_stxnid(tmp_workdir, run_mongocdc, capture,
                                                         retryable):
    """1.9 snapshots at the newest oplog entry (determineSnapshotOffsets): when
    that entry is a retryable write (pymongo's default) every `r` record, the
    first and the `last` alike, has its stxnid; lsid/txnNumber stay null. In
    oplog mode the snapshot's offsets, the final one included, carry it too
    (SourceInfo.lastOffset); an entry outside a session gives null."""
    sim = Sim(tmp_workdir, (), extra=("--server-version", "5.0"))
    try:
        c = sim.client(retryWrites=retryable)
        c.itdb.snap.insert_many([{"_id": i, "v": i} for i in range(5)])
        newest = next(c.local["oplog.rs"].find().sort("$natural", -1).limit(1))
        want = _java_stxnid(newest)
        assert (want is not None) == retryable, newest
        cfg = oplog_cfg(tmp_workdir, sim.uri, **{"capture.mode": capture,
                                                 "snapshot.mode": "initial_only"})
        r = run_mongocdc("-c", cfg, timeout_s=60)
        assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
        snap = [x for x in data_records(read_jsonl(tmp_workdir / "events.jsonl"), PREFIX)
                if x.op == "r"]
        assert [x.payload["source"]["snapshot"] for x in snap] == ["true"] * 4 + ["last"]
        for x in snap:
            src = x.payload["source"]
            assert src["stxnid"] == want and src["lsid"] is None and src["txnNumber"] is None, src
            assert src["ord"] == newest["ts"].inc and src["h"] is None, src
        if capture == "oplog":
            stored = stored_value(tmp_workdir)
            assert (stored["sec"], stored["ord"]) == (newest["ts"].time, newest["ts"].inc)
            assert stored.get("stxnid") == want and "initsync" not in stored, stored
    finally:
        sim.stop()
