"""Signals are never lost, never dropped and never a dead end
(debezium-format.md §5.3, §5.4; docs/INCREMENTAL.md "Signals and the offsets").

- A graceful stop right after an execute-snapshot signal (source or file
  channel): the stored position never passes the signal before what it asked
  for is in the offsets, so the snapshot runs after the restart.
- A second execute-snapshot for a collection already queued or being read is
  queued again, as Debezium's queue: a filtered snapshot followed by an
  unfiltered one reads every document.
- A signal naming more collections than the offsets can carry is refused at
  read time (ERROR naming the signal and the limit, ABORTED notification),
  the offsets stay writable and a restart does not die on it.
- A very long signal is resolved with a bounded number of server round trips
  and one summary WARN, and a stop right after it is not held up.

Timings are bounded loosely: the machine is shared and noisy.
"""

import json
import time
import uuid

import pytest

import kafka_support
from conftest import wait_until
from pipeline_support import Sim, log_text, offsets_value, read_jsonl, wait_streaming, write_config

PREFIX = "it"
SIGNALS = "sigdb.signals"


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    s = Sim(tmp_path_factory.mktemp("durasim"), members=1)
    yield s
    s.stop()


def cfg_for(workdir, sim, kafka=None, **raw):
    base = {"signal.data.collection": SIGNALS, "snapshot.mode": "no_data",
            "debezium.compatibility": "3.x", "incremental.snapshot.chunk.size": 50}
    base.update(raw)
    return write_config(workdir, sim.uri, kafka=kafka, raw=base)


def signal(c, kind, data, sid=None):
    sid = sid or "sig-%s" % uuid.uuid4().hex[:8]
    db, coll = SIGNALS.split(".")
    c[db][coll].insert_one({"_id": sid, "type": kind, "data": data})
    return sid


def snapshot_keys(path, db, coll):
    """The _id of every incremental-snapshot read (op r) of db.coll."""
    topic = "%s.%s.%s" % (PREFIX, db, coll)
    keys = []
    if not path.exists():
        return keys
    for r in read_jsonl(path):
        if r.topic != topic or r.value_raw is None:
            continue
        p = json.loads(r.value_raw)
        p = p.get("payload", p)
        if p["op"] == "r":
            keys.append(json.loads(p["after"])["_id"])
    return keys


def lines_with(workdir, *needles):
    return [ln for ln in log_text(workdir).splitlines() if all(n in ln for n in needles)]


def stored(workdir):
    text = offsets_value(workdir)
    return json.loads(text) if text else {}


@pytest.mark.parametrize("delay_s", [0, 0.1, 0.3, 0.5])
def test_sigterm_right_after_a_source_signal_still_snapshots_after_restart(
        tmp_workdir, sim, start_mongocdc, delay_s):
    c = sim.client()
    db, coll = "durdb", "src_%d" % int(delay_s * 1000)
    c[db][coll].drop()
    c[db][coll].insert_many([{"_id": i} for i in range(300)])
    cfg = cfg_for(tmp_workdir, sim)
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir)
    sid = signal(c, "execute-snapshot", {"data-collections": ["%s.%s" % (db, coll)]})
    time.sleep(delay_s)
    assert d.stop(timeout_s=30) == 0
    events = tmp_workdir / "events.jsonl"
    if len(set(snapshot_keys(events, db, coll))) < 300:
        # not finished before the stop: the offsets must say what is left
        assert "incremental_snapshot_collections" in json.dumps(stored(tmp_workdir)) or \
            not lines_with(tmp_workdir, sid, "queued"), \
            "the signal was queued but the stored offsets do not carry it"
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir)
    wait_until(lambda: len(set(snapshot_keys(events, db, coll))) >= 300, 60,
               "every document snapshotted after the restart")
    assert sorted(set(snapshot_keys(events, db, coll))) == list(range(300))
    assert d.stop(timeout_s=30) == 0


@pytest.mark.parametrize("delay_s", [0.1, 0.3, 0.5])
def test_sigterm_right_after_a_file_signal_still_snapshots_after_restart(
        tmp_workdir, sim, start_mongocdc, delay_s):
    c = sim.client()
    db, coll = "durdb", "file_%d" % int(delay_s * 1000)
    c[db][coll].drop()
    c[db][coll].insert_many([{"_id": i} for i in range(300)])
    sigfile = tmp_workdir / "signals.txt"
    cfg = cfg_for(tmp_workdir, sim, **{"signal.enabled.channels": "source,file",
                                       "signal.file": str(sigfile),
                                       "signal.poll.interval.ms": 100})
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir)
    sid = "file-" + uuid.uuid4().hex[:6]
    sigfile.write_text(json.dumps({"id": sid, "type": "execute-snapshot",
                                   "data": {"data-collections": ["%s.%s" % (db, coll)]}}) + "\n")
    time.sleep(delay_s)
    assert d.stop(timeout_s=30) == 0
    events = tmp_workdir / "events.jsonl"
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir)
    wait_until(lambda: len(set(snapshot_keys(events, db, coll))) >= 300, 60,
               "every document snapshotted after the restart")
    assert sorted(set(snapshot_keys(events, db, coll))) == list(range(300))
    assert d.stop(timeout_s=30) == 0


def test_a_second_signal_for_a_queued_collection_is_queued_again(tmp_workdir, sim,
                                                                   start_mongocdc):
    c = sim.client()
    db, coll = "durdb", "twice"
    c[db][coll].drop()
    c[db][coll].insert_many([{"_id": i, "g": i % 15} for i in range(1500)])
    d = start_mongocdc("-c", cfg_for(tmp_workdir, sim,
                                     **{"notification.enabled.channels": "log"}))
    wait_streaming(tmp_workdir)
    ns = "%s.%s" % (db, coll)
    first = signal(c, "execute-snapshot", {
        "data-collections": [ns],
        "additional-conditions": [{"data-collection": ns, "filter": '{"g": 0}'}]})
    second = signal(c, "execute-snapshot", {"data-collections": [ns]})
    # COMPLETED comes once the queue is empty (Debezium's), under the last signal
    wait_until(lambda: lines_with(tmp_workdir, "incremental snapshot (signal %s) completed"
                                  % second), 90, "the second signal to complete")
    keys = snapshot_keys(tmp_workdir / "events.jsonl", db, coll)
    assert sorted(set(keys)) == list(range(1500))
    # the filtered pass read its 100, the unfiltered one all 1,500
    assert len(keys) == 1600, len(keys)
    scans = lines_with(tmp_workdir, "type='TABLE_SCAN_COMPLETED'", "data_collection=" + ns)
    assert [("total_rows_scanned=100," in ln, "total_rows_scanned=1500," in ln)
            for ln in scans] == [(True, False), (False, True)], scans
    assert len(lines_with(tmp_workdir, "type='STARTED'")) == 2
    assert d.stop(timeout_s=30) == 0


def big_signal_doc(sid, n, fmt, first=()):
    """n names from fmt after the names first (existing collections, so that
    the snapshot runs long enough for offsets carrying the list to be
    written)."""
    return {"_id": sid, "type": "execute-snapshot",
            "data": {"data-collections": list(first) + [fmt % i for i in range(n - len(first))]}}


def test_a_signal_too_long_for_the_offsets_is_refused_and_capture_goes_on(
        tmp_workdir, sim, start_mongocdc):
    c = sim.client()
    db, coll = "durdb", "after_long"
    c[db][coll].drop()
    c[db][coll].insert_many([{"_id": i} for i in range(20)])
    cfg = cfg_for(tmp_workdir, sim, **{"notification.enabled.channels": "log"})
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir)
    sdb, scoll = SIGNALS.split(".")
    sid = "long-" + uuid.uuid4().hex[:6]
    c[sdb][scoll].insert_one(big_signal_doc(sid, 8001, "durdb.missing_collection_%05d"))
    wait_until(lambda: lines_with(tmp_workdir, " ERROR ", sid), 60, "the refusal")
    err = lines_with(tmp_workdir, " ERROR ", sid)[0]
    assert "refused" in err and str(8001) in err and str(512 * 1024) in err, err
    assert lines_with(tmp_workdir, "type='ABORTED'", sid), "no ABORTED notification"
    assert not lines_with(tmp_workdir, "type='STARTED'", sid)
    # capture and snapshots go on; the offsets stay small
    ok = signal(c, "execute-snapshot", {"data-collections": ["%s.%s" % (db, coll)]})
    wait_until(lambda: lines_with(tmp_workdir, "incremental snapshot (signal %s) completed" % ok),
               60, "the next snapshot")
    assert sorted(set(snapshot_keys(tmp_workdir / "events.jsonl", db, coll))) == list(range(20))
    assert len(offsets_value(tmp_workdir) or "") < 512 * 1024
    assert d.stop(timeout_s=30) == 0
    # a restart does not die on it either
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir)
    c[db][coll].insert_one({"_id": 1000})
    wait_until(lambda: any(r.topic == "%s.%s.%s" % (PREFIX, db, coll) and '1000' in (r.key or "")
                           for r in read_jsonl(tmp_workdir / "events.jsonl")), 30, "streaming")
    assert d.running()
    assert d.stop(timeout_s=30) == 0


def test_a_signal_too_long_for_the_offsets_topic_leaves_kafka_offsets_writable(
        tmp_workdir, sim, start_mongocdc, kafka):
    """With offsets.storage kafka: the 8,001-name signal that made the offset
    record exceed the producer's and the topic's size limit (the task then
    exited 1 at every restart) is refused, and offsets go on being stored."""
    c = sim.client()
    db, coll = "durdb", "kafka_long"
    c[db][coll].drop()
    c[db][coll].insert_many([{"_id": i} for i in range(10)])
    c[db]["kafka_long_big"].drop()
    c[db]["kafka_long_big"].insert_many([{"_id": i} for i in range(2000)])
    prefix = "dur%s" % uuid.uuid4().hex[:6]
    cfg = cfg_for(tmp_workdir, sim, kafka={"bootstrap.servers": kafka.bootstrap},
                  **{"topic.prefix": prefix, "offsets.storage": "kafka",
                     "incremental.snapshot.chunk.size": 20,
                     "offsets.topic": "mongocdc-offsets-" + prefix})
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir)
    sdb, scoll = SIGNALS.split(".")
    sid = "klong-" + uuid.uuid4().hex[:6]
    c[sdb][scoll].insert_one(big_signal_doc(sid, 8001, "durdb.missing_collection_%05d",
                                            first=["durdb.kafka_long_big"]))
    wait_until(lambda: lines_with(tmp_workdir, " ERROR ", sid), 60, "the refusal")
    ok = signal(c, "execute-snapshot", {"data-collections": ["%s.%s" % (db, coll)]})
    wait_until(lambda: lines_with(tmp_workdir, "incremental snapshot (signal %s) completed" % ok),
               60, "the next snapshot")
    time.sleep(1.0)  # a few offset flushes
    assert d.running(), log_text(tmp_workdir)[-3000:]
    assert not lines_with(tmp_workdir, "cannot store the offsets")
    assert d.stop(timeout_s=30) == 0
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir)
    time.sleep(1.0)
    assert d.running(), log_text(tmp_workdir)[-3000:]
    assert d.stop(timeout_s=30) == 0


def test_a_long_signal_then_sigterm_stops_promptly_with_one_warn(tmp_workdir, sim,
                                                                 start_mongocdc):
    c = sim.client()
    cfg = cfg_for(tmp_workdir, sim)
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir)
    sdb, scoll = SIGNALS.split(".")
    sid = "wide-" + uuid.uuid4().hex[:6]
    # names with no '.' resolve to nothing: one summary WARN, nothing queued
    c[sdb][scoll].insert_one(big_signal_doc(sid, 10000, "no_such_name_%05d"))
    wait_until(lambda: lines_with(tmp_workdir, " WARN ", sid), 60, "the summary WARN")
    warns = lines_with(tmp_workdir, " WARN ", sid, "data-collections entr")
    assert len(warns) == 1, warns[:3]
    # the summary and the conclusion, not a line per name
    assert len(lines_with(tmp_workdir, " WARN ", sid)) <= 2
    assert "10000 data-collections entries" in warns[0] and "no_such_name_00000" in warns[0] \
        and "and 9995 more" in warns[0], warns[0]
    # the capture thread is free again: a change right after is streamed
    c.durdb.after_wide.insert_one({"_id": 1})
    wait_until(lambda: any(r.topic == "%s.durdb.after_wide" % PREFIX
                           for r in read_jsonl(tmp_workdir / "events.jsonl")), 30, "the insert")
    # a second long signal, and a stop while it may still be resolved
    sid2 = "wide-" + uuid.uuid4().hex[:6]
    c[sdb][scoll].insert_one(big_signal_doc(sid2, 10000, "durdb.nope_%05d"))
    time.sleep(0.2)
    t0 = time.monotonic()
    assert d.stop(timeout_s=60) == 0
    took = time.monotonic() - t0
    # cursor.max.await.time.ms (300 ms) + offsets.flush.timeout.ms (5 s), loosely
    assert took < 15, took


def test_a_paused_snapshot_stays_paused_across_a_restart(tmp_workdir, sim, start_mongocdc):
    c = sim.client()
    db, coll = "durdb", "paused"
    c[db][coll].drop()
    c[db][coll].insert_many([{"_id": i} for i in range(3000)])
    cfg = cfg_for(tmp_workdir, sim, **{"incremental.snapshot.chunk.size": 10})
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir)
    events = tmp_workdir / "events.jsonl"
    sid = signal(c, "execute-snapshot", {"data-collections": ["%s.%s" % (db, coll)]})
    signal(c, "pause-snapshot", {})
    wait_until(lambda: lines_with(tmp_workdir, "pause-snapshot (signal"), 30, "the pause")
    assert d.stop(timeout_s=30) == 0
    before = len(snapshot_keys(events, db, coll))
    assert before < 3000, "finished before the pause"
    assert "mongocdc_incremental_snapshot_paused" in json.dumps(stored(tmp_workdir))
    d = start_mongocdc("-c", cfg)
    wait_until(lambda: lines_with(tmp_workdir, "resumed from the offsets", "paused"), 30,
               "the restored pause")
    time.sleep(1.5)
    assert len(snapshot_keys(events, db, coll)) == before, "the paused snapshot ran"
    signal(c, "resume-snapshot", {})
    wait_until(lambda: lines_with(tmp_workdir, "incremental snapshot (signal %s) completed" % sid),
               90, "the resumed snapshot")
    assert sorted(set(snapshot_keys(events, db, coll))) == list(range(3000))
    assert d.stop(timeout_s=30) == 0


@pytest.mark.parametrize("delay_s", [0.2, 0.6])
def test_sigterm_right_after_a_kafka_signal_still_snapshots_after_restart(
        tmp_workdir, sim, start_mongocdc, kafka, delay_s):
    if kafka.is_mock:
        pytest.skip("needs a real broker (consumer group commits)")
    c = sim.client()
    db, coll = "durdb", "kafka_sig_%d" % int(delay_s * 1000)
    c[db][coll].drop()
    c[db][coll].insert_many([{"_id": i} for i in range(300)])
    topic = kafka_support.create_topic(kafka, kafka_support.unique_topic("mcdc-dursig"))
    cfg = cfg_for(tmp_workdir, sim, **{"signal.enabled.channels": "source,kafka",
                                       "signal.kafka.topic": topic,
                                       "signal.kafka.bootstrap.servers": kafka.bootstrap,
                                       "signal.kafka.groupId": "g-" + uuid.uuid4().hex[:8]})
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir)
    sid = "kafka-" + uuid.uuid4().hex[:6]
    kafka_support.produce(kafka, topic, [(PREFIX.encode(), json.dumps(
        {"id": sid, "type": "execute-snapshot",
         "data": {"data-collections": ["%s.%s" % (db, coll)]}}).encode())], partition=0)
    time.sleep(delay_s)
    assert d.stop(timeout_s=30) == 0
    events = tmp_workdir / "events.jsonl"
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir)
    wait_until(lambda: len(set(snapshot_keys(events, db, coll))) >= 300, 60,
               "every document snapshotted after the restart")
    assert sorted(set(snapshot_keys(events, db, coll))) == list(range(300))
    assert d.stop(timeout_s=30) == 0
