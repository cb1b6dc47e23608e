"""Signals (debezium-format.md §5.3) from every channel, and notifications.

- Source channel: bad signal documents each get one WARN naming the signal id
  and the problem; the signal document is still an ordinary event on its
  topic, and streaming and offsets go on.
- `log` signals through the source, file and kafka channels and through
  `mongocdc signal` reach the daemon's log with {} replaced by the offset.
- Kafka channel: only records keyed topic.prefix are signals (as Debezium's
  KafkaSignalChannel); what was read is committed, so a restart does not run
  it again.
- File channel: complete lines are read and removed, a partial line stays.
- Notifications: Debezium's sink record (key {"id"}, value id, type,
  aggregate_type, additional_data, timestamp) on notification.sink.topic.name
  and the log channel's line, for an incremental snapshot.
"""

import json
import re
import subprocess
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
    s = Sim(tmp_path_factory.mktemp("sigsim"), members=1)
    yield s
    s.stop()


def cfg_for(workdir, sim, kafka=None, **raw):
    base = {"signal.data.collection": SIGNALS, "snapshot.mode": "no_data",
            "debezium.compatibility": "3.x"}
    base.update(raw)
    return write_config(workdir, sim.uri, kafka=kafka, raw=base)


def warn_lines(workdir, needle):
    return [ln for ln in log_text(workdir).splitlines() if " WARN " in ln and needle in ln]


def log_line(workdir, needle):
    for ln in log_text(workdir).splitlines():
        if needle in ln:
            return ln
    return None


def wait_log(workdir, needle, timeout_s=30):
    wait_until(lambda: log_line(workdir, needle) is not None, timeout_s, repr(needle))
    return log_line(workdir, needle)


def assert_offset_substituted(line, marker):
    """marker was written as '<marker> {}': the {} became the offset JSON."""
    rest = line.split(marker, 1)[1]
    assert "{}" not in rest, line
    m = re.search(r"(\{.*\})", rest)
    assert m, line
    off = json.loads(m.group(1))
    assert "resume_token" in off or "sec" in off, off


def run_signal_cmd(mongocdc_bin, cfg, *args, timeout=60):
    return subprocess.run([str(mongocdc_bin), "signal", "-c", str(cfg), *args],
                          capture_output=True, text=True, timeout=timeout)


BAD_SIGNALS = [
    # (document, text the WARN must name besides the id)
    ({"_id": "bad-two-fields", "type": "log"}, "has 2 fields"),
    ({"_id": "bad-four", "type": "log", "data": {}, "x": 1}, "has 4 fields"),
    ({"_id": "bad-type", "type": "explode", "data": {}}, "unknown type 'explode'"),
    ({"_id": "bad-json", "type": "log", "data": "{not json"}, "not valid JSON"),
    ({"_id": "bad-data", "type": "log", "data": 7}, "neither a document nor a JSON string"),
    ({"_id": "bad-empty", "type": "execute-snapshot", "data": {"data-collections": []}},
     "data-collections is empty"),
    ({"_id": "bad-regex", "type": "execute-snapshot", "data": {"data-collections": ["a.(b"]}},
     "not a valid regex"),
    ({"_id": "bad-surrogate", "type": "execute-snapshot",
      "data": {"data-collections": ["sigdata.rows"], "surrogate-key": "k"}},
     "Surrogate key not supported for MongoDB"),
    ({"_id": "bad-filter", "type": "execute-snapshot",
      "data": {"data-collections": ["sigdata.rows"],
               "additional-conditions": [{"data-collection": "sigdata.rows",
                                          "filter": "{oops"}]}},
     "not valid JSON"),
]


def test_bad_signals_warn_once_each_and_streaming_goes_on(tmp_workdir, sim, start_mongocdc):
    c = sim.client()
    c.sigdata.rows.insert_one({"_id": 0, "v": "before"})
    d = start_mongocdc("-c", cfg_for(tmp_workdir, sim))
    wait_streaming(tmp_workdir)
    db, coll = SIGNALS.split(".")
    for doc, _ in BAD_SIGNALS:
        c[db][coll].insert_one(doc)
    c.sigdata.rows.insert_one({"_id": 1, "v": "after"})
    events = tmp_workdir / "events.jsonl"

    def row_seen():
        return any(r.topic == "it.sigdata.rows" and '"after"' in (r.value_raw or "")
                   for r in read_jsonl(events))
    wait_until(row_seen, 30, "the row written after the bad signals")
    for doc, why in BAD_SIGNALS:
        lines = warn_lines(tmp_workdir, doc["_id"])
        assert len(lines) == 1, (doc["_id"], lines)
        assert why in lines[0], (why, lines[0])
    # every signal document is an ordinary event on the signal topic
    sig_events = [r for r in read_jsonl(events) if r.topic == "it." + SIGNALS]
    for doc, _ in BAD_SIGNALS:
        assert any(doc["_id"] in (r.value_raw or "") for r in sig_events), doc["_id"]
    assert d.running()
    wait_until(lambda: offsets_value(tmp_workdir) is not None, 20, "offsets stored")
    first = offsets_value(tmp_workdir)
    c.sigdata.rows.insert_one({"_id": 2, "v": "later"})
    wait_until(lambda: offsets_value(tmp_workdir) != first, 20, "offsets to move on")
    assert d.stop(timeout_s=30) == 0


def test_log_signal_through_the_source_channel_and_the_command(tmp_workdir, sim,
                                                               start_mongocdc, mongocdc_bin):
    c = sim.client()
    cfg = cfg_for(tmp_workdir, sim)
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir)
    db, coll = SIGNALS.split(".")
    c[db][coll].insert_one({"_id": "log-src-1", "type": "log",
                            "data": {"message": "source-log-marker {}"}})
    assert_offset_substituted(wait_log(tmp_workdir, "source-log-marker"), "source-log-marker")
    # data as a JSON string (Debezium's documented shape)
    c[db][coll].insert_one({"_id": "log-src-2", "type": "log",
                            "data": '{"message": "string-data-marker {}"}'})
    wait_log(tmp_workdir, "string-data-marker")
    # mongocdc signal: the first channel is source, an insert through the URI
    r = run_signal_cmd(mongocdc_bin, cfg, "log", "command-log-marker {}")
    assert r.returncode == 0, r.stderr
    sid = r.stdout.strip()
    assert uuid.UUID(sid)
    assert "source channel" in r.stderr
    assert_offset_substituted(wait_log(tmp_workdir, "command-log-marker"), "command-log-marker")
    assert c[db][coll].find_one({"_id": sid})["type"] == "log"
    assert d.stop(timeout_s=30) == 0


def test_file_channel_reads_lines_and_removes_them(tmp_workdir, sim, start_mongocdc,
                                                    mongocdc_bin):
    sigfile = tmp_workdir / "signals.txt"
    cfg = cfg_for(tmp_workdir, sim, **{"signal.enabled.channels": "file,source",
                                       "signal.file": str(sigfile),
                                       "signal.poll.interval.ms": 200})
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir)
    sigfile.write_text(
        json.dumps({"id": "file-1", "type": "log", "data": {"message": "file-log-marker {}"}})
        + "\n" + "this is not json\n" + "\n"
        + json.dumps({"id": "file-2", "type": "nope", "data": {}}) + "\n"
        + '{"id": "file-3", "type": "log", "da')  # still being written
    assert_offset_substituted(wait_log(tmp_workdir, "file-log-marker"), "file-log-marker")
    wait_until(lambda: warn_lines(tmp_workdir, "file-2"), 10, "the WARN of file-2")
    assert "unknown type 'nope'" in warn_lines(tmp_workdir, "file-2")[0]
    assert any("line 2" in ln and "not a JSON object" in ln
               for ln in warn_lines(tmp_workdir, "file signal channel"))
    assert sigfile.read_text() == '{"id": "file-3", "type": "log", "da'
    with open(sigfile, "a") as f:
        f.write('ta": {"message": "completed-line-marker {}"}}\n')
    wait_log(tmp_workdir, "completed-line-marker")
    # the command writes to the first channel: file
    r = run_signal_cmd(mongocdc_bin, cfg, "log", "file-command-marker {}")
    assert r.returncode == 0, r.stderr
    assert "file channel" in r.stderr
    assert_offset_substituted(wait_log(tmp_workdir, "file-command-marker"),
                              "file-command-marker")
    wait_until(lambda: sigfile.read_text() == "", 10, "the file emptied")
    # a line over the 16 MiB a signal may have: cut with a WARN, the next line still read
    with open(sigfile, "a") as f:
        f.write('{"id": "huge", "type": "log", "data": {"message": "' + "x" * (17 << 20) + '"}}\n')
        f.write("not json after huge\n")
        f.write(json.dumps({"id": "after-huge", "type": "log",
                            "data": {"message": "after-huge-marker {}"}}) + "\n")
    wait_log(tmp_workdir, "after-huge-marker", timeout_s=30)
    # lines are numbered on from the first one this run read (each is cut from
    # the file's front once read): the huge one is not line 1, the next is one more
    cut = [int(m.group(1)) for ln in warn_lines(tmp_workdir, "file signal channel")
           for m in [re.search(r"line (\d+) of .* cut from the file", ln)] if m]
    assert len(cut) == 1 and cut[0] > 6, cut
    assert any(("line %d" % (cut[0] + 1)) in ln and "not a JSON object" in ln
               for ln in warn_lines(tmp_workdir, "file signal channel")), \
        warn_lines(tmp_workdir, "file signal channel")
    assert d.stop(timeout_s=30) == 0


def test_kafka_channel_keyed_records_only_and_committed(tmp_workdir, sim, start_mongocdc,
                                                        mongocdc_bin, kafka):
    if kafka.is_mock:
        pytest.skip("needs a real broker (consumer group commits)")
    topic = kafka_support.create_topic(kafka, kafka_support.unique_topic("mcdc-signal"))
    group = "g-" + uuid.uuid4().hex[:8]
    cfg = cfg_for(tmp_workdir, sim, **{"signal.enabled.channels": "kafka,source",
                                       "signal.kafka.topic": topic,
                                       "signal.kafka.bootstrap.servers": kafka.bootstrap,
                                       "signal.kafka.groupId": group})

    def rec(sid, msg):
        return json.dumps({"id": sid, "type": "log", "data": {"message": msg}}).encode()
    kafka_support.produce(kafka, topic, [
        (b"someone-else", rec("k-other", "other-key-marker {}")),
        (PREFIX.encode(), rec("k-1", "kafka-log-marker {}")),
        (PREFIX.encode(), b"{broken"),
    ], partition=0)
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir)
    assert_offset_substituted(wait_log(tmp_workdir, "kafka-log-marker", 60), "kafka-log-marker")
    wait_until(lambda: warn_lines(tmp_workdir, "kafka signal channel"), 20, "the broken record")
    assert "doesn't match the connector's name" in log_text(tmp_workdir)
    assert log_line(tmp_workdir, "other-key-marker") is None
    # the command produces keyed topic.prefix to the signal topic
    r = run_signal_cmd(mongocdc_bin, cfg, "log", "kafka-command-marker {}")
    assert r.returncode == 0, r.stderr
    assert "kafka channel" in r.stderr
    assert_offset_substituted(wait_log(tmp_workdir, "kafka-command-marker", 60),
                              "kafka-command-marker")
    assert d.stop(timeout_s=30) == 0
    # a restart (new log file) reads on from the committed offset: nothing runs twice
    kafka_support.produce(kafka, topic, [(PREFIX.encode(), rec("k-2", "after-restart {}"))],
                          partition=0)
    d2 = start_mongocdc("-c", cfg)
    wait_log(tmp_workdir, "after-restart", 60)
    assert log_line(tmp_workdir, "kafka-log-marker") is None
    assert log_line(tmp_workdir, "kafka-command-marker") is None
    assert d2.stop(timeout_s=30) == 0


def test_signal_command_usage_and_failures(tmp_workdir, sim, mongocdc_bin):
    cfg = cfg_for(tmp_workdir, sim)
    assert run_signal_cmd(mongocdc_bin, cfg).returncode == 2
    assert run_signal_cmd(mongocdc_bin, cfg, "explode").returncode == 2
    assert run_signal_cmd(mongocdc_bin, cfg, "execute-snapshot").returncode == 2
    r = run_signal_cmd(mongocdc_bin, cfg, "execute-snapshot", "a.b", "--filter", "a.b={x")
    assert r.returncode == 2 and "not a JSON document" in r.stderr
    assert run_signal_cmd(mongocdc_bin, cfg, "pause-snapshot", "extra").returncode == 2
    r = run_signal_cmd(mongocdc_bin, cfg, "execute-snapshot", "sigdata.rows", "--blocking",
                       "--filter", 'sigdata.rows={"v": "after"}')
    assert r.returncode == 0, r.stderr
    sid = r.stdout.strip()
    db, coll = SIGNALS.split(".")
    doc = sim.client()[db][coll].find_one({"_id": sid})
    assert doc["type"] == "execute-snapshot"
    assert doc["data"] == {"data-collections": ["sigdata.rows"], "type": "blocking",
                           "additional-conditions": [{"data-collection": "sigdata.rows",
                                                      "filter": '{"v": "after"}'}]}
    ro = cfg_for(tmp_workdir, sim, **{"read.only": True})
    r = run_signal_cmd(mongocdc_bin, ro, "pause-snapshot")
    assert r.returncode == 1 and "no channel can carry" in r.stderr, r.stderr
    bad = cfg_for(tmp_workdir, sim, **{"signal.enabled.channels": "file",
                                       "signal.file": str(tmp_workdir / "no" / "such" / "f")})
    r = run_signal_cmd(mongocdc_bin, bad, "resume-snapshot")
    assert r.returncode == 1 and "file channel failed" in r.stderr, r.stderr
    assert r.stdout == ""


NOTIFICATION_SCHEMA = {
    "type": "struct", "fields": [
        {"type": "string", "optional": False, "field": "id"},
        {"type": "string", "optional": False, "field": "type"},
        {"type": "string", "optional": False, "field": "aggregate_type"},
        {"type": "map", "keys": {"type": "string", "optional": False},
         "values": {"type": "string", "optional": False}, "optional": True,
         "field": "additional_data"},
        {"type": "int64", "optional": False, "field": "timestamp"}],
    "optional": False, "name": "io.debezium.connector.common.Notification", "version": 1}


@pytest.mark.parametrize("schemas", [False, True])
def test_notifications_on_the_sink_topic_and_the_log(tmp_workdir, sim, start_mongocdc, kafka,
                                                     schemas):
    if kafka.is_mock:
        pytest.skip("needs a real broker")
    c = sim.client()
    c.notedb.items.delete_many({})
    c.notedb.items.insert_many([{"_id": i} for i in range(5)])
    ntopic = kafka_support.create_topic(kafka, kafka_support.unique_topic("mcdc-notify"))
    prefix = "n" + uuid.uuid4().hex[:8]
    cfg = cfg_for(tmp_workdir, sim, kafka=kafka.config(),
                  **{"topic.prefix": prefix,
                     "notification.enabled.channels": "sink,log",
                     "notification.sink.topic.name": ntopic,
                     "key.converter.schemas.enable": schemas,
                     "value.converter.schemas.enable": schemas})
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir)
    db, coll = SIGNALS.split(".")
    sid = "notify-" + uuid.uuid4().hex[:6]
    c[db][coll].insert_one({"_id": sid, "type": "execute-snapshot",
                            "data": {"data-collections": ["notedb.items"]}})
    wait_until(lambda: "incremental snapshot (signal %s) completed" % sid in log_text(tmp_workdir),
               60, "the incremental snapshot")
    recs = kafka_support.consume_all(kafka, ntopic, min_count=3, timeout_s=30)
    types = []
    for r in recs:
        k, v = json.loads(r.key), json.loads(r.value)
        if schemas:
            assert k["schema"]["name"] == "io.debezium.connector.common.NotificationKey"
            assert v["schema"] == NOTIFICATION_SCHEMA
            k, v = k["payload"], v["payload"]
        assert k == {"id": sid}
        assert list(v) == ["id", "type", "aggregate_type", "additional_data", "timestamp"]
        assert v["id"] == sid and v["aggregate_type"] == "Incremental Snapshot"
        assert isinstance(v["timestamp"], int) and v["timestamp"] > 1.6e12
        types.append(v["type"])
    assert types[0] == "STARTED" and types[-1] == "COMPLETED", types
    values = [json.loads(r.value) for r in recs]
    values = [v["payload"] if schemas else v for v in values]
    scans = [v for v in values if v["type"] == "TABLE_SCAN_COMPLETED"]
    assert scans and scans[0]["additional_data"]["data_collection"] == "notedb.items"
    line = log_line(tmp_workdir, "[Notification Service]  {aggregateType='Incremental Snapshot', "
                                 "type='STARTED'")
    assert line, log_text(tmp_workdir)[-3000:]
    assert d.stop(timeout_s=30) == 0


def test_initial_snapshot_notifications_on_the_log(tmp_workdir, sim, start_mongocdc):
    c = sim.client()
    c.initnote.rows.insert_many([{"_id": i} for i in range(3)])
    d = start_mongocdc("-c", cfg_for(tmp_workdir, sim, **{
        "snapshot.mode": "initial", "notification.enabled.channels": "log",
        "collection.include.list": "initnote.rows"}))
    wait_streaming(tmp_workdir)
    head = "[Notification Service]  {aggregateType='Initial Snapshot', type="
    started = wait_log(tmp_workdir, head + "'STARTED'")
    assert started.endswith("additionalData={connector_name=it}}"), started
    wait_log(tmp_workdir, head + "'COMPLETED'")
    assert log_line(tmp_workdir, head + "'ABORTED'") is None
    assert d.stop(timeout_s=30) == 0


def test_unreachable_signal_broker_never_stops_capture(tmp_workdir, sim, start_mongocdc):
    c = sim.client()
    cfg = cfg_for(tmp_workdir, sim, **{"signal.enabled.channels": "kafka,source",
                                       "signal.kafka.bootstrap.servers": "127.0.0.1:1",
                                       "signal.kafka.topic": "nowhere-signal"})
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir)
    wait_until(lambda: warn_lines(tmp_workdir, "kafka signal channel"), 30, "the outage WARN")
    db, coll = SIGNALS.split(".")
    c[db][coll].insert_one({"_id": "log-outage", "type": "log",
                            "data": {"message": "outage-source-marker {}"}})
    c.outage.rows.insert_one({"_id": 1})
    wait_log(tmp_workdir, "outage-source-marker")
    wait_until(lambda: any(r.topic == "it.outage.rows"
                           for r in read_jsonl(tmp_workdir / "events.jsonl")), 30, "the row")
    assert len(warn_lines(tmp_workdir, "kafka signal channel")) == 1
    assert " ERROR " not in log_text(tmp_workdir)
    assert d.running()
    assert d.stop(timeout_s=30) == 0
