"""cursor.oversize.handling.mode (Debezium 2.6+/3.x) against the simulator,
whose change events fail (10334) or split ($changeStreamSplitLargeEvent) as a
real server's do: by their size after the stream's stages.

- fail (default): exit 1 with the size and the setting to change; the events
  before it delivered.
- skip: events whose fullDocument / fullDocumentBeforeChange is over
  cursor.oversize.skip.threshold are dropped on the server, logged with the
  namespace, _id and sizes, counted (log and metrics), the stored offset moves
  past them, smaller events and deletes are delivered.
- split: a ~20 MiB update event (7 MiB updatedFields, 13 MiB looked-up
  document) at the real 16 MiB limit comes as two fragments, is reassembled
  and reaches Kafka as one record byte-identical to the record of the same
  event read unsplit; a SIGKILL between the fragments, then a restart,
  delivers it once and whole, nothing lost.
- split refused on a server without the stage (5.0), and with oplog capture.
"""

import json
import re
import signal
import time
import urllib.request

import pytest

from conftest import wait_until
from kafka_support import create_topic
from pipeline_support import (Sim, data_records, key_id_text, log_text, read_jsonl, read_topics,
                              write_config)

MIB = 1024 * 1024


def _start_time(c):
    with c.start_session() as s:
        c.itdb.warmup.insert_one({"_id": "t0"}, session=s)
        ot = s.operation_time
    return (ot.time << 32) | ot.inc


def _recs(path, prefix, coll):
    return [r for r in data_records(read_jsonl(path), prefix) if r.topic == "%s.itdb.%s" % (prefix, coll)]


def _ids_ops(recs):
    return [(json.loads(key_id_text(r)), r.op) for r in recs if r.op in ("c", "u", "d", "r")]


def _metric(log, name):
    port = int(re.search(r"metrics: listening on 127\.0\.0\.1 port (\d+)", log).group(1))
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        body = r.read().decode()
    m = re.search(r"^%s\{[^}]*\} (\d+)$" % re.escape(name), body, re.M)
    assert m, body[-3000:]
    return int(m.group(1))


def test_fail_stops_with_the_size_and_the_setting(tmp_workdir, start_mongocdc):
    """Default mode: the oversized event (its limit lowered to 200000 bytes for speed) stops
    the daemon with exit 1; the event before it is delivered, the stored offset is before it."""
    sim = Sim(tmp_workdir, extra=["--max-event-bytes", "200000"])
    try:
        c = sim.client()
        t0 = _start_time(c)
        c.itdb.big.insert_one({"_id": 1, "v": "small"})
        cfg = write_config(tmp_workdir, sim.uri, **{"snapshot.mode": "no_data",
                                                    "capture.start.op.time": t0})
        d = start_mongocdc("-c", cfg)
        out = tmp_workdir / "events.jsonl"
        wait_until(lambda: _ids_ops(_recs(out, "it", "big")) == [(1, "c")], 60, "the first event")
        # a getMore that meets the oversized event fails as a whole (a real server returns
        # none of that batch): the big document comes alone after the first was delivered
        c.itdb.big.insert_one({"_id": 2, "v": "x" * 250000})
        wait_until(lambda: not d.running(), 60, "mongocdc to stop on the oversized event")
        assert d.stop(timeout_s=10) == 1
        log = log_text(tmp_workdir)
        assert re.search(r"over MongoDB's 16 MiB limit \(250\d{3} bytes\)", log), log[-2000:]
        assert "change event after resume token at Timestamp(" in log, log[-2000:]
        assert "cursor.oversize.handling.mode" in log
        assert _ids_ops(_recs(out, "it", "big")) == [(1, "c")]
    finally:
        sim.stop()


def test_skip_with_a_threshold_above_the_event_says_what_to_change(tmp_workdir, start_mongocdc):
    """skip whose threshold (300000 bytes) is above the document of an event over the limit
    (200000 bytes here): the error names the threshold to lower, never "skip" again."""
    sim = Sim(tmp_workdir, extra=["--max-event-bytes", "200000"])
    try:
        c = sim.client()
        t0 = _start_time(c)
        cfg = write_config(tmp_workdir, sim.uri, **{"snapshot.mode": "no_data",
                                                    "capture.start.op.time": t0,
                                                    "cursor.oversize.handling.mode": "skip",
                                                    "cursor.oversize.skip.threshold": 300000})
        d = start_mongocdc("-c", cfg)
        c.itdb.big.insert_one({"_id": 2, "v": "x" * 250000})
        wait_until(lambda: not d.running(), 60, "mongocdc to stop on the oversized event")
        assert d.stop(timeout_s=10) == 1
        log = log_text(tmp_workdir)
        assert "no document of it is over cursor.oversize.skip.threshold (300000 bytes): " \
               "lower it, use mode split, or exclude its collection" in log, log[-2000:]
        assert "split or skip moves past it" not in log
    finally:
        sim.stop()


def test_skip_drops_large_documents_on_the_server(tmp_workdir, start_mongocdc):
    """skip with a 100000-byte threshold: the insert and the update (looked-up document) of a
    200 KB document are skipped, logged and counted; its delete and the small documents are
    delivered; after a restart the skipped events are not met again."""
    sim = Sim(tmp_workdir)
    try:
        c = sim.client()
        t0 = _start_time(c)
        c.itdb.big.insert_one({"_id": 1, "v": "small"})
        c.itdb.big.insert_one({"_id": 2, "v": "x" * 200000})
        c.itdb.big.update_one({"_id": 2}, {"$set": {"w": 1}})
        c.itdb.big.insert_one({"_id": 3, "v": "small"})
        opts = {"snapshot.mode": "no_data", "capture.start.op.time": t0,
                "cursor.oversize.handling.mode": "skip", "cursor.oversize.skip.threshold": 100000,
                "metrics.enabled": True, "metrics.http.port": 0}
        cfg = write_config(tmp_workdir, sim.uri, sink_path=tmp_workdir / "run1.jsonl", **opts)
        d = start_mongocdc("-c", cfg)
        out = tmp_workdir / "run1.jsonl"
        wait_until(lambda: (3, "c") in _ids_ops(_recs(out, "it", "big")), 60, "the third insert")
        # deleted only now: an updateLookup after the delete would find no document (null)
        c.itdb.big.delete_one({"_id": 2})
        wait_until(lambda: (2, "d") in _ids_ops(_recs(out, "it", "big")), 60, "the delete")
        assert _ids_ops(_recs(out, "it", "big")) == [(1, "c"), (3, "c"), (2, "d")]
        log = log_text(tmp_workdir)
        skips = [l for l in log.splitlines() if "skipping the " in l]
        assert len(skips) == 2, log[-3000:]
        assert "WARN" in skips[0] and "insert of itdb.big" in skips[0] and '{"_id": 2}' in skips[0]
        assert re.search(r"fullDocument 2000\d\d bytes, fullDocumentBeforeChange none", skips[0])
        assert "update of itdb.big" in skips[1] and "100000 bytes" in skips[1]
        assert _metric(log, "mongocdc_events_oversize_skipped_total") == 2
        assert d.stop(timeout_s=30) == 0
        assert "2 oversized skipped" in log_text(tmp_workdir)
        # the stored offset is past the skipped events: a restart with fail meets none of them
        c.itdb.big.insert_one({"_id": 4})
        opts.update({"cursor.oversize.handling.mode": "fail"})
        opts.pop("cursor.oversize.skip.threshold")
        cfg2 = write_config(tmp_workdir, sim.uri, name="cfg2.yaml",
                            sink_path=tmp_workdir / "run2.jsonl", **opts)
        d2 = start_mongocdc("-c", cfg2)
        out2 = tmp_workdir / "run2.jsonl"
        wait_until(lambda: _ids_ops(_recs(out2, "it", "big")), 60, "the event after the restart")
        assert _ids_ops(_recs(out2, "it", "big")) == [(4, "c")]
        assert d2.running() and d2.stop(timeout_s=30) == 0
    finally:
        sim.stop()


def _mask_time(raw):
    """The record's value with only the top-level processing times (after "op") zeroed."""
    i = raw.rindex('"op":')
    return raw[:i] + re.sub(r'"ts_(ms|us|ns)":\d+', r'"ts_\1":0', raw[i:])


def _big_workload(c):
    c.itdb.huge.insert_one({"_id": 1, "a": "x" * (6 * MIB)})
    c.itdb.huge.update_one({"_id": 1}, {"$set": {"b": "y" * (7 * MIB)}})
    c.itdb.huge.insert_one({"_id": 2, "v": "after"})


def _kafka_cfg(tmp_workdir, sim, kafka, prefix, name, t0, mode):
    return write_config(tmp_workdir, sim.uri, name=name,
                        kafka={"bootstrap.servers": kafka.bootstrap,
                               "message.max.bytes": str(64 * MIB)},
                        **{"topic.prefix": prefix, "snapshot.mode": "no_data",
                           "capture.start.op.time": t0, "sink.queue.max.bytes": 128 * MIB,
                           "offsets.file.path": str(tmp_workdir / (name + ".offsets.json")),
                           "cursor.oversize.handling.mode": mode})


def test_split_round_trips_byte_identical_into_kafka(tmp_workdir, kafka, start_mongocdc):
    """At the real limit a ~20 MiB update event splits in two; the reassembled record equals,
    byte for byte but the processing times, the record a second daemon produces from the same
    event read unsplit (the simulator's limit raised to 48 MB for that run, a test knob: a
    real server never returns it whole)."""
    if kafka.is_mock:
        pytest.skip("needs a real broker (a 20 MiB record)")
    prefix = "ovs%d" % int(time.time())
    topic = create_topic(kafka, prefix + ".itdb.huge", config={"max.message.bytes": str(64 * MIB)})
    sim = Sim(tmp_workdir, members=1)
    try:
        c = sim.client()
        t0 = _start_time(c)
        _big_workload(c)
        d = start_mongocdc("-c", _kafka_cfg(tmp_workdir, sim, kafka, prefix, "split.yaml", t0, "split"))

        def recs(n):
            r = read_topics(kafka.bootstrap, [topic], idle_s=2, timeout_s=60)
            return r if len(r) >= n else None
        got = wait_until(lambda: recs(3), 180, "the three records", interval_s=2)
        assert [(json.loads(key_id_text(r)), r.op) for r in got] == [(1, "c"), (1, "u"), (2, "c")]
        upd = got[1]
        assert len(upd.value_raw) > 20 * MIB
        after = upd.after()
        assert after == {"_id": 1, "a": "x" * (6 * MIB), "b": "y" * (7 * MIB)}
        assert upd.updated_fields() == {"b": "y" * (7 * MIB)}
        log = log_text(tmp_workdir)
        assert d.stop(timeout_s=60) == 0
        assert "1 reassembled from fragments" in log_text(tmp_workdir), log[-2000:]

        sim.control("max_event_bytes", bytes=48000000)
        d2 = start_mongocdc("-c", _kafka_cfg(tmp_workdir, sim, kafka, prefix, "whole.yaml", t0, "fail"))
        all6 = wait_until(lambda: recs(6), 180, "the records of the unsplit run", interval_s=2)
        assert d2.stop(timeout_s=60) == 0
        assert "0 reassembled from fragments" in log_text(tmp_workdir)
        whole = all6[4]
        assert (json.loads(key_id_text(whole)), whole.op) == (1, "u")
        assert whole.key == upd.key
        assert _mask_time(whole.value_raw) == _mask_time(upd.value_raw)
    finally:
        sim.stop()


def test_split_sigkill_between_fragments(tmp_workdir, start_mongocdc):
    """SIGKILL after the first fragment arrived (getMores slowed to 4 s, so the second is
    still on its way): nothing of the event was emitted, the stored position is before it;
    the restarted daemon reads both fragments again and delivers the event once and whole,
    then the next one."""
    sim = Sim(tmp_workdir, members=1)
    try:
        c = sim.client()
        t0 = _start_time(c)
        c.itdb.huge.insert_one({"_id": 1, "a": "x" * (6 * MIB)})
        opts = {"snapshot.mode": "no_data", "capture.start.op.time": t0,
                "cursor.oversize.handling.mode": "split", "log.level": "debug"}
        out1 = tmp_workdir / "run1.jsonl"
        cfg = write_config(tmp_workdir, sim.uri, sink_path=out1, **opts)
        d = start_mongocdc("-c", cfg)
        wait_until(lambda: _ids_ops(_recs(out1, "it", "huge")) == [(1, "c")], 60, "the insert")
        time.sleep(1.0)  # its offset flushed (offsets.flush.interval.ms 200)
        sim.control("delay", command="getMore", ms=4000)
        c.itdb.huge.update_one({"_id": 1}, {"$set": {"b": "y" * (7 * MIB)}})
        c.itdb.huge.insert_one({"_id": 2, "v": "after"})
        wait_until(lambda: "split event: fragment 1 of 2 received" in log_text(tmp_workdir), 60,
                   "the first fragment")
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait(timeout=10)
        log1 = log_text(tmp_workdir)
        assert "fragment 2 of 2" not in log1 and "reassembled" not in log1, log1[-2000:]
        assert _ids_ops(_recs(out1, "it", "huge")) == [(1, "c")]
        off = (tmp_workdir / "offsets.json").read_text()
        sim.control("delay", command="getMore", ms=0)

        out2 = tmp_workdir / "run2.jsonl"
        opts.update({"metrics.enabled": True, "metrics.http.port": 0})
        cfg2 = write_config(tmp_workdir, sim.uri, name="cfg2.yaml", sink_path=out2, **opts)
        d2 = start_mongocdc("-c", cfg2)
        wait_until(lambda: (2, "c") in _ids_ops(_recs(out2, "it", "huge")), 120,
                   "the event after the split one")
        recs = _recs(out2, "it", "huge")
        assert _ids_ops(recs) == [(1, "u"), (2, "c")], (_ids_ops(recs), off)
        assert recs[0].after() == {"_id": 1, "a": "x" * (6 * MIB), "b": "y" * (7 * MIB)}
        assert recs[0].updated_fields() == {"b": "y" * (7 * MIB)}
        assert _metric(log_text(tmp_workdir), "mongocdc_events_split_total") == 1
        assert d2.stop(timeout_s=60) == 0
        assert "1 reassembled from fragments" in log_text(tmp_workdir)
    finally:
        sim.stop()


def test_split_refused_on_a_server_without_the_stage(tmp_workdir, run_mongocdc):
    """MongoDB 5.0 has no $changeStreamSplitLargeEvent: exit 1 naming the version and the
    setting, before any stream is opened (Debezium refuses it as well)."""
    sim = Sim(tmp_workdir, members=1, extra=["--server-version", "5.0"])
    try:
        cfg = write_config(tmp_workdir, sim.uri, **{"snapshot.mode": "no_data",
                                                    "cursor.oversize.handling.mode": "split"})
        r = run_mongocdc("-c", cfg, timeout_s=60)
        err = r.stderr.decode(errors="replace")
        assert r.returncode == 1, err[-2000:]
        assert "split needs MongoDB 6.0.9+ or 7.0+" in err and "5.0.28" in err, err[-2000:]
    finally:
        sim.stop()


def test_config_checks(tmp_workdir, run_mongocdc):
    """skip without a threshold, and skip/split with oplog capture, are refused at load."""
    cfg = write_config(tmp_workdir, "mongodb://127.0.0.1:1/?replicaSet=rs0",
                       **{"cursor.oversize.handling.mode": "skip"})
    r = run_mongocdc("-c", cfg, timeout_s=30)
    err = r.stderr.decode(errors="replace")
    assert r.returncode != 0 and "cursor.oversize.skip.threshold" in err, err
    cfg = write_config(tmp_workdir, "mongodb://127.0.0.1:1/?replicaSet=rs0", name="c2.yaml",
                       **{"cursor.oversize.handling.mode": "split", "capture.mode": "oplog",
                          "debezium.compatibility": "1.9"})
    r = run_mongocdc("-c", cfg, timeout_s=30)
    err = r.stderr.decode(errors="replace")
    assert r.returncode != 0 and "oplog" in err and "cursor.oversize.handling.mode" in err, err
