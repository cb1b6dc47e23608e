"""Incremental (ad hoc) snapshots through signals on the simulator
(debezium-format.md §5.2-5.4): windows closed by markers (insert_insert,
insert_delete) or by cluster time (read.only), deduplication against the
stream, every _id type and mixed collections, additional-conditions, stop,
pause/resume, SIGKILL then restart, blocking snapshots, both dialects.

Each check replays the topic the way a consumer would (by key, in order) and
compares the result with the collection's final state: a snapshot that loses
or reorders a change fails it.
"""

import datetime
import json
import re
import signal as os_signal
import threading
import time
import uuid

import pytest
from bson import json_util, Binary, Code, Decimal128, Int64, MaxKey, MinKey, ObjectId, Timestamp
from bson.binary import UuidRepresentation
UUID_REP = UuidRepresentation.UNSPECIFIED  # Binary stays Binary, whatever its subtype
from bson.codec_options import CodecOptions

from conftest import wait_until
from pipeline_support import (Sim, log_text, offsets_value, read_jsonl, read_topics,
                              wait_streaming, write_config)

PREFIX = "it"
SIGNALS = "sigdb.signals"


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    s = Sim(tmp_path_factory.mktemp("incsim"), members=1)
    yield s
    s.stop()


def cfg_for(workdir, sim, dialect="3.x", **opts):
    base = {"signal.data.collection": SIGNALS, "snapshot.mode": "no_data",
            "debezium.compatibility": dialect, "incremental.snapshot.chunk.size": 7}
    base.update({k.replace("__", "."): v for k, v in opts.items()})
    return write_config(workdir, sim.uri, raw=base)


def coll_records(path, db, coll):
    topic = "%s.%s.%s" % (PREFIX, db, coll)
    return [r for r in read_jsonl(path) if r.topic == topic]


def key_of(rec):
    """The _id of a record, from its key (strict extended JSON of the _id)."""
    k = json.loads(rec.key)
    k = k.get("payload", k)
    return json_util.loads('{"v": %s}' % k["id"], json_options=LOPTS)["v"]


JOPTS = json_util.JSONOptions(json_mode=json_util.JSONMode.CANONICAL,
                               uuid_representation=UUID_REP)
LOPTS = json_util.JSONOptions(uuid_representation=UUID_REP)


def norm(v):
    """A hashable, type-exact form of a BSON value."""
    return json_util.dumps({"v": v}, json_options=JOPTS)


def replay(recs):
    """A consumer applying the topic in order: key -> document (or gone)."""
    state = {}
    for r in recs:
        if r.value_raw is None:
            continue  # tombstone
        p = json.loads(r.value_raw)
        p = p.get("payload", p)
        op = p["op"]
        k = norm(key_of(r))
        if op == "d":
            state.pop(k, None)
        elif p.get("after") is not None:
            state[k] = json_util.loads(p["after"], json_options=LOPTS)
    return state


def final_state(c, db, coll):
    opts = CodecOptions(document_class=dict, uuid_representation=UUID_REP)
    return {norm(d["_id"]): d for d in c[db].get_collection(coll, codec_options=opts).find()}


def assert_replay_matches(c, path, db, coll):
    got = replay(coll_records(path, db, coll))
    want = final_state(c, db, coll)
    missing = sorted(set(want) - set(got))[:5]
    extra = sorted(set(got) - set(want))[:5]
    assert not missing and not extra, "missing %s, extra %s" % (missing, extra)
    for k, d in want.items():
        assert norm(got[k]) == norm(d), k


def stored_offset(workdir):
    """The one stored offset value (the file maps partition -> value)."""
    text = offsets_value(workdir)
    if not text:
        return None
    vals = list(json.loads(text).values())
    return vals[0] if vals else None


def signal(c, kind, data, sid=None):
    sid = sid or "sig-%s" % uuid.uuid4().hex[:8]
    db, coll = SIGNALS.split(".")
    c[db][coll].insert_one({"_id": sid, "type": kind, "data": data})
    return sid


def reads(path, db, coll):
    out = []
    for r in coll_records(path, db, coll):
        if r.value_raw is None:
            continue
        p = json.loads(r.value_raw)
        p = p.get("payload", p)
        if p["op"] == "r":
            out.append((r, p))
    return out


def wait_done(workdir, sid, timeout_s=60):
    wait_until(lambda: "incremental snapshot (signal %s) completed" % sid in log_text(workdir),
               timeout_s, "incremental snapshot %s to complete" % sid)


@pytest.mark.parametrize("strategy", ["insert_insert", "insert_delete"])
def test_heavy_writes_during_the_snapshot_replay_to_the_final_state(tmp_workdir, sim,
                                                                    start_mongocdc, strategy):
    """Also with insert_delete, whose window Debezium closes at once (before
    the stream has caught up, §5.4 quirks); here it closes in stream order."""
    c = sim.client()
    db, coll = "incdb", "heavy_" + strategy
    c[db][coll].insert_many([{"_id": i, "v": 0, "pad": "x" * 50} for i in range(600)])
    d = start_mongocdc("-c", cfg_for(tmp_workdir, sim, **{
        "incremental.snapshot.chunk.size": 8,
        "incremental.snapshot.watermarking.strategy": strategy}))
    wait_streaming(tmp_workdir)
    stop = threading.Event()
    wrote = {"n": 0}

    def writer():
        wc = sim.client()
        col = wc[db][coll]
        i = 0
        while not stop.is_set():
            k = (i * 37) % 700
            op = i % 4
            if op == 0:
                col.update_one({"_id": k}, {"$inc": {"v": 1}})
            elif op == 1:
                col.delete_one({"_id": (k + 5) % 700})
            elif op == 2:
                col.replace_one({"_id": k + 1}, {"_id": k + 1, "v": -i}, upsert=True)
            else:
                col.insert_one({"_id": 1000 + i, "v": i}) if i % 8 == 3 else \
                    col.update_one({"_id": (k * 3) % 600}, {"$set": {"w": i}})
            i += 1
            wrote["n"] = i
        wc.close()

    t = threading.Thread(target=writer)
    t.start()
    try:
        wait_until(lambda: wrote["n"] >= 50, 30, "the writer under way")
        sid = signal(c, "execute-snapshot", {"data-collections": ["incdb\\.heavy_" + strategy]})
        wait_done(tmp_workdir, sid, 120)
        during = wrote["n"]
    finally:
        stop.set()
        t.join()
    marker = signal(c, "log", {"message": "writes over at {}"})
    wait_until(lambda: "writes over at" in log_text(tmp_workdir), 30, "the log signal")
    assert during > 100
    assert_replay_matches(c, tmp_workdir / "events.jsonl", db, coll)
    rs = reads(tmp_workdir / "events.jsonl", db, coll)
    assert rs and all(p["source"]["snapshot"] == "incremental" for _, p in rs)
    # the markers are ordinary events on the signal topic too (§5.3)
    sig_topic = [r for r in read_jsonl(tmp_workdir / "events.jsonl")
                 if r.topic == "%s.%s" % (PREFIX, SIGNALS)]
    assert any("snapshot-window-open" in (r.value_raw or "") for r in sig_topic)
    if strategy == "insert_insert":
        assert any("snapshot-window-close" in (r.value_raw or "") for r in sig_topic)
    assert marker
    # once done, the committed offsets no longer carry the snapshot's progress
    wait_until(lambda: "incremental_snapshot_collections" not in (stored_offset(tmp_workdir) or
                                                                  {"incremental_snapshot_collections": 1}),
               30, "offsets without the finished snapshot")
    assert d.stop(timeout_s=30) == 0


ALL_IDS = [
    MinKey(), None, -5, Int64(2 ** 40), 2.5, Decimal128("7.25"), float("nan"), "",
    "str", "zeta", {"a": 1}, {"a": 1, "b": [1, 2]}, Binary(b"\x01\x02", 0),
    Binary(b"\x03", 5), Binary(uuid.uuid4().bytes, 4), Binary(b"\x00" * 3, 128), ObjectId(),
    Binary(b"\x04", 1), Binary(b"\x05", 2), Binary(b"\x06" * 16, 3), Binary(b"\x07", 6),
    Binary(b"\x08", 7), Binary(b"\x09", 8), ObjectId(), ObjectId(), False, True,
    datetime.datetime(2020, 1, 2, 3, 4, 5), datetime.datetime(1960, 1, 1), Timestamp(10, 1),
    Timestamp(10, 2), Code("f()"), MaxKey(),
]


@pytest.mark.parametrize("dialect", ["1.9", "3.x"])
def test_every_id_type_in_one_mixed_collection(tmp_workdir, sim, start_mongocdc, dialect):
    c = sim.client()
    db, coll = "incdb", "mixed_" + dialect.replace(".", "")
    c[db][coll].insert_many([{"_id": v, "n": i} for i, v in enumerate(ALL_IDS)])
    d = start_mongocdc("-c", cfg_for(tmp_workdir, sim, dialect=dialect,
                                     **{"incremental.snapshot.chunk.size": 3}))
    wait_streaming(tmp_workdir)
    sid = signal(c, "execute-snapshot", {"data-collections": ["%s.%s" % (db, coll)]})
    wait_done(tmp_workdir, sid)
    rs = reads(tmp_workdir / "events.jsonl", db, coll)
    got = sorted(norm(key_of(r)) for r, _ in rs)
    assert got == sorted(norm(v) for v in ALL_IDS)
    for r, p in rs:
        assert p["op"] == "r" and p["source"]["snapshot"] == "incremental"
        if dialect == "1.9":
            assert "rs" in p["source"] and "before" not in p
        else:
            assert "rs" not in p["source"] and "before" in p
    assert_replay_matches(c, tmp_workdir / "events.jsonl", db, coll)
    assert d.stop(timeout_s=30) == 0


def test_additional_conditions_filter_every_chunk_and_the_maximum(tmp_workdir, sim,
                                                                   start_mongocdc):
    c = sim.client()
    db, coll = "incdb", "cond"
    c[db][coll].insert_many([{"_id": i, "k": "A" if i % 3 == 0 else "B"} for i in range(60)])
    d = start_mongocdc("-c", cfg_for(tmp_workdir, sim, **{"metrics.enabled": True,
                                                          "metrics.http.port": 0}))
    wait_streaming(tmp_workdir)
    sid = signal(c, "execute-snapshot", {
        "data-collections": ["incdb.cond"],
        "additional-conditions": [{"data-collection": "incdb\\.COND", "filter": '{"k": "A"}'}]})
    wait_done(tmp_workdir, sid)
    keys = sorted(key_of(r) for r, _ in reads(tmp_workdir / "events.jsonl", db, coll))
    assert keys == [i for i in range(60) if i % 3 == 0]
    # the rows are counted per collection like the initial snapshot's
    from test_metrics import get, metrics_port, samples
    s = samples(get(metrics_port(tmp_workdir, d), "/metrics")[1])
    rows = [v for k, v in s.items()
            if k.startswith("mongocdc_snapshot_collection_rows_total") and 'collection="incdb.cond"' in k]
    evs = [v for k, v in s.items() if k.startswith("mongocdc_collection_events_total")
           and 'collection="incdb.cond"' in k and 'op="r"' in k]
    assert rows == [20] and evs == [20], (rows, evs)
    assert d.stop(timeout_s=30) == 0


def test_insert_delete_watermarking(tmp_workdir, sim, start_mongocdc):
    c = sim.client()
    db, coll = "incdb", "insdel"
    c[db][coll].insert_many([{"_id": "k%03d" % i} for i in range(40)])
    d = start_mongocdc("-c", cfg_for(tmp_workdir, sim, **{
        "incremental.snapshot.watermarking.strategy": "insert_delete"}))
    wait_streaming(tmp_workdir)
    sdb, scoll = SIGNALS.split(".")
    before = {d["_id"] for d in c[sdb][scoll].find({}, {"_id": 1})}  # other tests' markers
    sid = signal(c, "execute-snapshot", {"data-collections": ["incdb.insdel"]})
    wait_done(tmp_workdir, sid)
    assert len(reads(tmp_workdir / "events.jsonl", db, coll)) == 40

    def left():
        return [d for d in c[sdb][scoll].find({"type": {"$in": ["snapshot-window-open",
                                                                  "snapshot-window-close"]}})
                if d["_id"] not in before]
    # insert_delete: no close marker is ever written, every open marker is
    # deleted again (the empty last chunk's too)
    wait_until(lambda: left() == [], 15, "no marker of this snapshot left")
    sig = [r for r in read_jsonl(tmp_workdir / "events.jsonl") if r.topic.endswith(SIGNALS)]
    assert any(json.loads(r.value_raw).get("op", json.loads(r.value_raw).get("payload", {})
                                           .get("op")) == "d" for r in sig if r.value_raw)
    assert d.stop(timeout_s=30) == 0


def test_stop_pause_resume(tmp_workdir, sim, start_mongocdc):
    c = sim.client()
    db = "incdb"
    big = 3000
    c[db].big1.insert_many([{"_id": i} for i in range(big)])
    c[db].big2.insert_many([{"_id": i} for i in range(50)])
    d = start_mongocdc("-c", cfg_for(tmp_workdir, sim, **{"incremental.snapshot.chunk.size": 5,
                                                         "notification.enabled.channels": "log"}))
    wait_streaming(tmp_workdir)
    sid = signal(c, "execute-snapshot", {"data-collections": ["incdb\\.big[12]"]})
    wait_until(lambda: len(reads(tmp_workdir / "events.jsonl", db, "big1")) >= 20, 30, "rows")
    signal(c, "pause-snapshot", {})
    wait_until(lambda: "pause-snapshot" in log_text(tmp_workdir), 30, "the pause")
    time.sleep(1.0)
    n = len(reads(tmp_workdir / "events.jsonl", db, "big1"))
    time.sleep(1.5)
    assert len(reads(tmp_workdir / "events.jsonl", db, "big1")) == n < big
    signal(c, "resume-snapshot", {})
    wait_until(lambda: len(reads(tmp_workdir / "events.jsonl", db, "big1")) > n, 30, "resumed")
    # stop big1 while its chunks are being read: it ends between chunks, big2 still runs
    signal(c, "stop-snapshot", {"data-collections": ["incdb.big1"], "type": "incremental"})
    wait_done(tmp_workdir, sid)
    b1 = [key_of(r) for r, _ in reads(tmp_workdir / "events.jsonl", db, "big1")]
    assert len(b1) < big and len(set(b1)) == len(b1)
    assert sorted(b1) == list(range(len(b1)))  # whole chunks, in _id order, nothing skipped
    assert len(reads(tmp_workdir / "events.jsonl", db, "big2")) == 50
    # Debezium's notifications, in order, on the log channel
    kinds = re.findall(r"aggregateType='Incremental Snapshot', type='([A-Z_]+)'",
                       log_text(tmp_workdir))
    for want in ("STARTED", "IN_PROGRESS", "PAUSED", "RESUMED", "ABORTED",
                 "TABLE_SCAN_COMPLETED", "COMPLETED"):
        assert want in kinds, (want, kinds[:20])
    assert kinds.index("STARTED") < kinds.index("PAUSED") < kinds.index("RESUMED")
    assert kinds[-1] == "COMPLETED"
    assert d.stop(timeout_s=30) == 0


def test_two_signals_for_one_collection_complete_each(tmp_workdir, sim, start_mongocdc):
    """Two execute-snapshot signals for the same collection: both read it, and
    each signal gets its own completion (log line and COMPLETED notification)."""
    c = sim.client()
    db, coll = "incdb", "twice"
    c[db][coll].insert_many([{"_id": i} for i in range(300)])
    d = start_mongocdc("-c", cfg_for(tmp_workdir, sim, **{"incremental.snapshot.chunk.size": 5,
                                                         "notification.enabled.channels": "log"}))
    wait_streaming(tmp_workdir)
    first = signal(c, "execute-snapshot", {"data-collections": ["incdb.twice"]})
    second = signal(c, "execute-snapshot", {"data-collections": ["incdb.twice"]})
    wait_done(tmp_workdir, second)
    wait_done(tmp_workdir, first, timeout_s=20)
    assert len(reads(tmp_workdir / "events.jsonl", db, coll)) == 600  # read twice
    log = log_text(tmp_workdir)
    for sid in (first, second):
        assert log.count("incremental snapshot (signal %s) completed" % sid) == 1, sid
    assert len(re.findall(r"aggregateType='Incremental Snapshot', type='COMPLETED'", log)) == 2
    assert d.stop(timeout_s=30) == 0


def test_signal_too_large_for_the_offsets_names_its_size(tmp_workdir, sim, start_mongocdc):
    """A signal whose collections the offsets cannot carry is refused with the
    size it would take, not the limit twice."""
    c = sim.client()
    db = "incbig"
    # 1000 collections of 240-byte names under a 200-byte signal id (repeated in
    # every queued entry): over the limit before any condition is counted
    for i in range(1000):
        c[db]["long_%04d_%s" % (i, "x" * 230)].insert_one({"_id": 1})
    d = start_mongocdc("-c", cfg_for(tmp_workdir, sim))
    wait_streaming(tmp_workdir)
    sid = signal(c, "execute-snapshot", {"data-collections": ["incbig\\.long_.*"]},
                 sid="big-" + "i" * 196)
    wait_until(lambda: "signal %s refused" % sid in log_text(tmp_workdir), 60, "the refusal")
    line = [ln for ln in log_text(tmp_workdir).splitlines() if "signal %s refused" % sid in ln][0]
    m = re.search(r"its 1000 collection\(s\) would make the incremental snapshot offsets "
                  r"at least (\d+) bytes, over the limit of 524288 bytes", line)
    assert m and int(m.group(1)) > 1000 * (240 + 200), line
    assert d.stop(timeout_s=30) == 0


def test_sigkill_mid_snapshot_then_restart_misses_no_key(tmp_workdir, sim, start_mongocdc):
    c = sim.client()
    db, coll = "incdb", "killed"
    n = 3000
    c[db][coll].insert_many([{"_id": i, "p": "y" * 200} for i in range(n)])
    cfg = cfg_for(tmp_workdir, sim, **{"incremental.snapshot.chunk.size": 10})
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir)
    sid = signal(c, "execute-snapshot", {"data-collections": ["incdb.killed"]})
    wait_until(lambda: "mongocdc_incremental_snapshot_primary_key" in json.dumps(
        stored_offset(tmp_workdir) or {}), 60, "progress in the offsets")
    d.proc.send_signal(os_signal.SIGKILL)
    d.proc.wait(timeout=10)
    off = stored_offset(tmp_workdir)
    assert len(reads(tmp_workdir / "events.jsonl", db, coll)) < n, "finished before the kill"
    assert json.loads(off["incremental_snapshot_collections"])[0][
        "incremental_snapshot_collections_id"] == "incdb.killed"
    assert json_util.loads(off["mongocdc_incremental_snapshot_primary_key"])["_id"] >= 0
    # Debezium's own key holds only its Java-serialised hex, which it fails on otherwise
    assert "incremental_snapshot_primary_key" not in off
    c[db][coll].delete_one({"_id": n - 1})
    c[db][coll].update_one({"_id": 0}, {"$set": {"after": "restart"}})
    d = start_mongocdc("-c", cfg)
    wait_done(tmp_workdir, sid, 180)
    keys = {key_of(r) for r, _ in reads(tmp_workdir / "events.jsonl", db, coll)}
    assert keys >= set(range(n - 1))
    assert_replay_matches(c, tmp_workdir / "events.jsonl", db, coll)
    assert d.stop(timeout_s=30) == 0


def test_blocking_snapshot(tmp_workdir, sim, start_mongocdc):
    c = sim.client()
    db, coll = "incdb", "blocking"
    c[db][coll].insert_many([{"_id": i, "t": i % 2} for i in range(30)])
    c[db].blocking2.insert_many([{"_id": "b%d" % i} for i in range(12)])
    d = start_mongocdc("-c", cfg_for(tmp_workdir, sim, **{"snapshot.max.threads": 2}))
    wait_streaming(tmp_workdir)
    signal(c, "execute-snapshot", {
        "data-collections": ["incdb.blocking", "incdb.blocking2"], "type": "BLOCKING",
        "additional-conditions": [{"data-collection": "incdb.blocking", "filter": '{"t": 1}'}]})
    wait_until(lambda: "blocking snapshot" in log_text(tmp_workdir) and
               "streaming resumes" in log_text(tmp_workdir), 30, "the blocking snapshot")
    c[db][coll].insert_one({"_id": 100, "t": 1})
    wait_until(lambda: any(json.loads(r.value_raw).get("op") == "c"
                           for r in coll_records(tmp_workdir / "events.jsonl", db, coll)
                           if r.value_raw), 30, "streaming after it")
    rs = reads(tmp_workdir / "events.jsonl", db, coll)
    assert sorted(key_of(r) for r, _ in rs) == list(range(1, 30, 2))
    rs2 = reads(tmp_workdir / "events.jsonl", db, "blocking2")
    assert sorted(key_of(r) for r, _ in rs2) == sorted("b%d" % i for i in range(12))
    flags = [p["source"]["snapshot"] for _, p in rs + rs2]
    assert flags.count("last") == 1 and set(flags) == {"true", "last"}
    assert d.stop(timeout_s=30) == 0


def _sim_has_roles():
    """Whether the simulator's --auth takes roles (USER:PASSWORD:ROLE,...)."""
    import importlib
    from conftest import MONGOSIM_DIR
    import sys
    if str(MONGOSIM_DIR) not in sys.path:
        sys.path.insert(0, str(MONGOSIM_DIR))
    return hasattr(importlib.import_module("simauth"), "parse_auth_arg")


def test_read_only_mode_writes_nothing(tmp_workdir, start_mongocdc):
    """read.only with --auth: the daemon's user may only read (when the
    simulator knows roles: readAnyDatabase + clusterMonitor, so any write
    would be refused), the signals come from another user; no marker is
    written, windows close by cluster time, and the topic still replays to
    the final state under concurrent updates."""
    roles = _sim_has_roles()
    extra = ["--auth", "admin:adminpw"]
    extra += ["--auth", "cdc:secret:readAnyDatabase,clusterMonitor"] if roles else \
        ["--auth", "cdc:secret"]
    s = Sim(tmp_workdir, members=1, extra=extra)
    try:
        uri = s.uri.replace("mongodb://", "mongodb://cdc:secret@")
        c = s.client(username="admin", password="adminpw")
        if roles:
            from pymongo.errors import OperationFailure
            with pytest.raises(OperationFailure):
                s.client(username="cdc", password="secret").sigdb.signals.insert_one({"_id": 0})
        db, coll = "incdb", "ro"
        c[db][coll].insert_many([{"_id": i, "v": 0} for i in range(120)])
        cfg = write_config(tmp_workdir, uri, raw={
            "signal.data.collection": SIGNALS, "snapshot.mode": "no_data", "read.only": True,
            "incremental.snapshot.chunk.size": 9})
        d = start_mongocdc("-c", cfg)
        wait_streaming(tmp_workdir)
        stop = threading.Event()

        def writer():
            i = 0
            while not stop.is_set():
                c[db][coll].update_one({"_id": i % 130}, {"$inc": {"v": 1}}, upsert=True)
                i += 1

        t = threading.Thread(target=writer)
        t.start()
        try:
            sid = signal(c, "execute-snapshot", {"data-collections": ["incdb.ro"]})
            wait_done(tmp_workdir, sid, 90)
        finally:
            stop.set()
            t.join()
        signal(c, "log", {"message": "quiet now"})
        wait_until(lambda: "quiet now" in log_text(tmp_workdir), 30, "the log signal")
        sdb, scoll = SIGNALS.split(".")
        assert c[sdb][scoll].count_documents({"type": {"$regex": "^snapshot-window"}}) == 0
        assert "cluster-time windows" in log_text(tmp_workdir)
        assert_replay_matches(c, tmp_workdir / "events.jsonl", db, coll)
        assert d.stop(timeout_s=30) == 0
    finally:
        s.stop()


def test_bad_signals_are_ignored_and_streaming_goes_on(tmp_workdir, sim, start_mongocdc):
    c = sim.client()
    d = start_mongocdc("-c", cfg_for(tmp_workdir, sim))
    wait_streaming(tmp_workdir)
    signal(c, "execute-snapshot", {"data-collections": []}, sid="bad-empty")
    signal(c, "no-such-type", {}, sid="bad-type")
    signal(c, "execute-snapshot", {"data-collections": ["incdb.no_such_coll"]}, sid="bad-unknown")
    signal(c, "execute-snapshot", {"data-collections": ["incdb.(unclosed"]}, sid="bad-regex")
    signal(c, "execute-snapshot", {"data-collections": ["incdb.after_bad"],
                                   "additional-conditions": [
                                       {"data-collection": "incdb.after_bad", "filter": "{nope"}]},
           sid="bad-filter")
    signal(c, "execute-snapshot", "{not json", sid="bad-json")
    db, coll = SIGNALS.split(".")
    c[db][coll].insert_one({"_id": "bad-shape", "type": "execute-snapshot"})  # two fields
    c.incdb.after_bad.insert_one({"_id": 1})
    wait_until(lambda: coll_records(tmp_workdir / "events.jsonl", "incdb", "after_bad"), 30,
               "the insert after the bad signals")
    wait_until(lambda: "bad-shape" in log_text(tmp_workdir), 30, "the last bad signal's WARN")
    text = log_text(tmp_workdir)
    warns = [ln for ln in text.splitlines() if "WARN" in ln]
    for sid in ("bad-empty", "bad-type", "bad-unknown", "bad-regex", "bad-filter", "bad-json",
                "bad-shape"):
        assert any(sid in ln for ln in warns), (sid, text)
    assert any("bad-unknown" in ln and "matches no existing collection" in ln for ln in warns)
    # every signal document is still an ordinary event on its topic
    sig_events = coll_records(tmp_workdir / "events.jsonl", db, coll)
    assert len(sig_events) >= 7
    assert d.running()
    assert d.stop(timeout_s=30) == 0


def test_sharded_per_shard_tasks_snapshot_what_each_shard_owns(tmp_workdir, start_mongocdc):
    """Per-shard tasks (connection mode replica_set): the signal, seen on the
    stream of the shard holding the signal collection, reaches every shard's
    task through the bus; each reads only the documents its shard owns
    (orphans excluded) with cluster-time windows on its own stream."""
    from conftest import import_mongosim
    mongosim = import_mongosim()
    sim = mongosim.MongoSim(topology="sharded", shards=2, members=1, noop_interval=0.3)
    sim.start()
    try:
        c = sim.client()
        c.admin.command("enableSharding", "shop")
        c.admin.command("shardCollection", "shop.orders", key={"_id": 1})
        c.admin.command("split", "shop.orders", middle={"_id": 100})
        c.admin.command("moveChunk", "shop.orders", find={"_id": 150}, to="shard02")
        c.shop.orders.insert_many([{"_id": i, "v": 0} for i in range(200)])
        cfg = write_config(tmp_workdir, sim.uri, raw={
            "signal.data.collection": SIGNALS, "snapshot.mode": "no_data",
            "incremental.snapshot.chunk.size": 16})
        d = start_mongocdc("-c", cfg)
        wait_until(lambda: log_text(tmp_workdir).count("streaming changes from") >= 2, 120,
                   "both shards streaming")
        stop = threading.Event()

        def writer():
            i = 0
            while not stop.is_set():
                c.shop.orders.update_one({"_id": (i * 7) % 200}, {"$inc": {"v": 1}})
                i += 1

        t = threading.Thread(target=writer)
        t.start()
        try:
            sid = signal(c, "execute-snapshot", {"data-collections": ["shop.orders"]})
            wait_until(lambda: log_text(tmp_workdir).count(
                "incremental snapshot (signal %s) completed" % sid) >= 2, 120,
                "both shards' snapshots")
        finally:
            stop.set()
            t.join()
        rs = reads(tmp_workdir / "events.jsonl", "shop", "orders")
        keys = sorted(key_of(r) for r, _ in rs)
        # every document once (superseded rows are replaced by their streamed changes)
        assert len(keys) == len(set(keys))
        assert "cluster-time windows" in log_text(tmp_workdir)
        signal(c, "log", {"message": "sharded done"})
        wait_until(lambda: "sharded done" in log_text(tmp_workdir), 30, "the log signal")
        time.sleep(1.0)
        assert_replay_matches(c, tmp_workdir / "events.jsonl", "shop", "orders")
        sdb, scoll = SIGNALS.split(".")
        assert c[sdb][scoll].count_documents({"type": {"$regex": "^snapshot-window"}}) == 0
        assert d.stop(timeout_s=30) == 0
    finally:
        sim.stop()


@pytest.mark.parametrize("dialect", ["1.9", "3.x"])
def test_through_kafka_the_topic_replays_to_the_final_state(tmp_workdir, sim, kafka,
                                                            start_mongocdc, dialect):
    prefix = "incr%s%s" % (dialect.replace(".", ""), uuid.uuid4().hex[:8])
    c = sim.client()
    db, coll = "incdb", "kafka_" + prefix
    c[db][coll].insert_many([{"_id": i, "v": 0} for i in range(200)] +
                            [{"_id": "s%d" % i} for i in range(20)])
    cfg = write_config(tmp_workdir, sim.uri, kafka={"bootstrap.servers": kafka.bootstrap}, raw={
        "topic.prefix": prefix, "signal.data.collection": SIGNALS, "snapshot.mode": "no_data",
        "debezium.compatibility": dialect, "incremental.snapshot.chunk.size": 32})
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir)
    stop = threading.Event()

    def writer():
        i = 0
        while not stop.is_set():
            c[db][coll].update_one({"_id": (i * 13) % 230}, {"$inc": {"v": 1}}, upsert=True)
            if i % 5 == 0:
                c[db][coll].delete_one({"_id": (i * 17) % 200})
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    try:
        sid = signal(c, "execute-snapshot", {"data-collections": ["%s.%s" % (db, coll)]})
        wait_done(tmp_workdir, sid, 90)
    finally:
        stop.set()
        t.join()
    signal(c, "log", {"message": "kafka test writes done"})
    wait_until(lambda: "kafka test writes done" in log_text(tmp_workdir), 30, "the log signal")
    assert d.stop(timeout_s=30) == 0
    recs = [r for r in read_topics(kafka.bootstrap, ["%s.%s.%s" % (prefix, db, coll)])]
    got = replay(recs)
    want = final_state(c, db, coll)
    assert set(got) == set(want)
    assert all(norm(got[k]) == norm(want[k]) for k in want)
    snap = [json.loads(r.value_raw) for r in recs if r.value_raw and '"op":"r"' in r.value_raw]
    assert snap and all(p["source"]["snapshot"] == "incremental" for p in snap)


def test_oplog_capture_mode(tmp_workdir, sim, start_mongocdc):
    """capture.mode oplog (1.9): the same hook in the oplog tailing loop."""
    c = sim.client()
    db, coll = "incdb", "oplogmode"
    c[db][coll].insert_many([{"_id": i} for i in range(50)])
    d = start_mongocdc("-c", cfg_for(tmp_workdir, sim, dialect="1.9", **{"capture.mode": "oplog"}))
    wait_until(lambda: "tailing local.oplog.rs" in log_text(tmp_workdir), 60, "tailing")
    sid = signal(c, "execute-snapshot", {"data-collections": ["incdb.oplogmode"]})
    c[db][coll].delete_one({"_id": 3})
    wait_done(tmp_workdir, sid)
    keys = sorted(key_of(r) for r, _ in reads(tmp_workdir / "events.jsonl", db, coll))
    assert set(keys) >= set(range(50)) - {3} and len(keys) == len(set(keys))
    assert_replay_matches(c, tmp_workdir / "events.jsonl", db, coll)
    assert d.stop(timeout_s=30) == 0


def test_refused_marker_write_aborts_the_snapshot_not_streaming(tmp_workdir, sim,
                                                                 start_mongocdc):
    c = sim.client()
    db, coll = "incdb", "refused"
    c[db][coll].insert_many([{"_id": i} for i in range(10)])
    d = start_mongocdc("-c", cfg_for(tmp_workdir, sim))
    wait_streaming(tmp_workdir)
    sim.control("fail", commands=["insert"], code=13, codeName="Unauthorized",
                errmsg="not authorized on sigdb to execute command { insert: \"signals\" }",
                appName="mongocdc", times=1)
    try:
        sid = signal(c, "execute-snapshot", {"data-collections": ["incdb.refused"]})
        wait_until(lambda: "incremental snapshot (signal %s) is aborted" % sid
                   in log_text(tmp_workdir), 30, "the abort")
        assert "read.only: true needs no write access" in log_text(tmp_workdir)
        c[db][coll].insert_one({"_id": 99})
        wait_until(lambda: any(key_of(r) == 99 for r in
                               coll_records(tmp_workdir / "events.jsonl", db, coll)), 30,
                   "streaming after the abort")
        assert not reads(tmp_workdir / "events.jsonl", db, coll)
        assert d.running()
        assert d.stop(timeout_s=30) == 0
    finally:
        sim.control("clear_faults")


def test_stop_arriving_while_a_chunk_is_read_stops_between_chunks(tmp_workdir, sim,
                                                                  start_mongocdc):
    """The chunk read is held up by the server; the stop signal lands between
    the window's open and close markers: that window is still emitted whole,
    then nothing more of the collection."""
    c = sim.client()
    db, coll = "incdb", "stop_mid_read"
    c[db][coll].insert_many([{"_id": i} for i in range(100)])
    d = start_mongocdc("-c", cfg_for(tmp_workdir, sim, **{"incremental.snapshot.chunk.size": 10}))
    wait_streaming(tmp_workdir)
    sim.control("fail", commands=["find"], blockTimeMS=1500, appName="mongocdc", times=1)
    try:
        signal(c, "execute-snapshot", {"data-collections": ["incdb.stop_mid_read"]})
        time.sleep(0.4)  # the daemon's first find (inside the open window) is blocked now
        signal(c, "stop-snapshot", {"data-collections": ["incdb.stop_mid_read"],
                                    "type": "incremental"})
        wait_until(lambda: "stopped after its open window" in log_text(tmp_workdir), 30,
                   "the stop between chunks")
    finally:
        sim.control("clear_faults")
    time.sleep(1.0)
    keys = [key_of(r) for r, _ in reads(tmp_workdir / "events.jsonl", db, coll)]
    assert keys == list(range(10)), keys
    assert "incremental_snapshot_collections" not in json.dumps(stored_offset(tmp_workdir) or {})
    assert d.stop(timeout_s=30) == 0


def test_graceful_restart_resumes_after_the_last_row_without_repeats(tmp_workdir, sim,
                                                                     start_mongocdc):
    c = sim.client()
    db, coll = "incdb", "graceful"
    n = 3000
    c[db][coll].insert_many([{"_id": "k%05d" % i} for i in range(n)])
    cfg = cfg_for(tmp_workdir, sim, **{"incremental.snapshot.chunk.size": 10})
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir)
    sid = signal(c, "execute-snapshot", {"data-collections": ["incdb.graceful"]})
    wait_until(lambda: len(reads(tmp_workdir / "events.jsonl", db, coll)) >= 100, 60, "rows")
    assert d.stop(timeout_s=30) == 0
    first = len(reads(tmp_workdir / "events.jsonl", db, coll))
    assert first < n, "finished before the stop"
    assert "mongocdc_incremental_snapshot_primary_key" in json.dumps(stored_offset(tmp_workdir))
    d = start_mongocdc("-c", cfg)
    wait_done(tmp_workdir, sid, 120)
    keys = [key_of(r) for r, _ in reads(tmp_workdir / "events.jsonl", db, coll)]
    # every row was acknowledged and committed at the stop: nothing is read twice
    assert sorted(keys) == ["k%05d" % i for i in range(n)]
    assert d.stop(timeout_s=30) == 0
