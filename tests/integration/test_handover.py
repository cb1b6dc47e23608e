"""Taking over Debezium's stored position (debezium-format.md §4.1, §4.4):
Debezium 1.9.8's and 3.6.1's offsets entries, under a connector name other
than topic.prefix, in the file store and in a Kafka Connect offsets topic
(25 partitions, keys placed by murmur2 as Kafka Connect's producer does).
mongocdc started with `name` set adopts the entry (no snapshot, every change
made while nothing ran delivered, deletes and tombstones included), says at
INFO which key and writer it took, and stores from then on under the
layout's key in the value form that layout's Debezium resumes from. A wrong
`name` is named in a WARN and by `mongocdc check`. A stored position that
stops moving while the stream reads on is WARNed and shown by a metric.

The Debezium entries are the bytes Debezium writes (Kafka Connect's
JsonConverter, schemas disabled; Java HashMap member order), built from a
position mongocdc reached on the same simulator so that the token is one the
server accepts.
"""
import base64
import json
import re
import time
import urllib.request

import bson
import pytest

from conftest import wait_until
from pipeline_support import (data_records, key_id_text, log_text, read_jsonl, read_topics,
                              wait_streaming, write_config)

PREFIX = "dbserver1"
NAME = "inventory-connector"


def debezium_entry(layout, token_doc, sec, ord_, prefix=PREFIX):
    """(key, value) bytes of a Debezium offsets record for the position."""
    if layout == "1.9":
        # SourceInfo.lastOffset@v1.9.8: {sec, ord, h, resume_token}, token as the _data hex.
        key = '["%s",{"rs":"rs0","server_id":"%s"}]' % (NAME, prefix)
        value = '{"sec":%d,"ord":%d,"resume_token":"%s","h":null}' % (sec, ord_,
                                                                      token_doc["_data"])
    else:
        # MongoDbOffsetContext@3.6.1: {sec, ord, resume_token}, Base64 of the token's BSON.
        key = '["%s",{"server_id":"%s"}]' % (NAME, prefix)
        value = '{"sec":%d,"ord":%d,"resume_token":"%s"}' % (
            sec, ord_, base64.b64encode(bson.encode(token_doc)).decode())
    return key, value


def first_run_position(workdir, sim, start_mongocdc, layout, prefix=PREFIX):
    """Runs mongocdc once (snapshot, stream) and returns its stored token and sec/ord."""
    cfg = write_config(workdir, sim.uri, name="run1.yaml", sink_path=workdir / "run1.jsonl",
                       **{"topic.prefix": prefix, "debezium.compatibility": layout})
    d = start_mongocdc("-c", cfg)
    wait_streaming(workdir, d)
    sim.client().itdb.gap.insert_one({"_id": 0})
    wait_until(lambda: any(r.topic == prefix + ".itdb.gap"
                           for r in read_jsonl(workdir / "run1.jsonl")), 30, "run 1's insert")
    assert d.stop(timeout_s=30) == 0
    doc = json.loads((workdir / "offsets.json").read_text())
    assert len(doc) == 1
    (key, value), = doc.items()
    # mongocdc's own key before `name`: the topic.prefix is the connector name.
    part = '{"rs":"rs0","server_id":"%s"}' % prefix if layout == "1.9" else \
        '{"server_id":"%s"}' % prefix
    assert key == '["%s",%s]' % (prefix, part)
    tok = value["resume_token"]
    token_doc = {"_data": tok} if layout == "1.9" else bson.decode(base64.b64decode(tok))
    if layout == "1.9":
        assert value["h"] is None and re.fullmatch(r"[0-9A-F]+", tok), value
    return token_doc, value["sec"], value["ord"]


def make_gap_changes(sim):
    c = sim.client().itdb.gap
    c.insert_one({"_id": 1, "v": 1})
    c.insert_one({"_id": 2, "v": 1})
    c.update_one({"_id": 1}, {"$set": {"v": 2}})
    c.delete_one({"_id": 2})
    c.delete_one({"_id": 0})


def gap_ops(path, recs=None, prefix=PREFIX):
    if recs is None:
        recs = read_jsonl(path)
    recs = [r for r in data_records(recs, prefix) if r.topic == prefix + ".itdb.gap"]
    # per key, in order (a topic of several partitions orders only within a key)
    return sorted([(r.op, json.loads(key_id_text(r))) if r.value is not None
            else ("tombstone", json.loads(key_id_text(r))) for r in recs], key=lambda o: o[1])


GAP = sorted([("c", 1), ("c", 2), ("u", 1), ("d", 2), ("tombstone", 2), ("d", 0), ("tombstone", 0)],
             key=lambda o: o[1])


@pytest.mark.parametrize("layout", ["1.9", "3.x"])
def test_takes_over_debezium_offsets_file(tmp_workdir, users_sim, start_mongocdc, run_mongocdc,
                                          layout):
    sim = users_sim
    token_doc, sec, ord_ = first_run_position(tmp_workdir, sim, start_mongocdc, layout)
    dkey, dvalue = debezium_entry(layout, token_doc, sec, ord_)
    path = tmp_workdir / "offsets.json"
    if layout == "3.x":
        # Debezium stopped inside a transaction (provide.transaction.metadata):
        # TransactionContext.store's keys, which mongocdc cannot continue (a WARN).
        dvalue = dvalue[:-1] + (',"transaction_id":"{\\"id\\": 1}:7",'
                                '"transaction_data_collection_order_itdb.gap":2}')
    # Only Debezium's entry, as a Debezium Server / Connect file store would hold it.
    path.write_text("{%s:%s}\n" % (json.dumps(dkey), dvalue))
    make_gap_changes(sim)

    # A wrong name: check names the entry instead of a PASS.
    bad = write_config(tmp_workdir, sim.uri, name="bad.yaml", sink_path=tmp_workdir / "x.jsonl",
                       raw={"name": "typo-connector"},
                       **{"topic.prefix": PREFIX, "debezium.compatibility": layout})
    r = run_mongocdc("check", "-c", bad, timeout_s=60)
    out = r.stdout.decode()
    own = ('["typo-connector",{"rs":"rs0","server_id":"%s"}]' % PREFIX if layout == "1.9"
           else '["typo-connector",{"server_id":"%s"}]' % PREFIX)
    # the start would snapshot past this source's position: a FAIL, exit 1
    assert re.search(r"FAIL\s+offsets: no position under %s; found one under %s: is `name`"
                     % (re.escape(own), re.escape(dkey)), out), out
    assert r.returncode == 1, out
    assert "no stored position for rs0" not in out, out

    cfg = write_config(tmp_workdir, sim.uri, name="run2.yaml", sink_path=tmp_workdir / "run2.jsonl",
                       raw={"name": NAME},
                       **{"topic.prefix": PREFIX, "debezium.compatibility": layout})
    r = run_mongocdc("check", "-c", cfg, timeout_s=60)
    assert re.search(r"PASS\s+offsets: stored position of rs0 under %s, written by %s"
                     % (re.escape(dkey), "Debezium 1.x" if layout == "1.9"
                        else r"Debezium 2\.x-3\.x"), r.stdout.decode()), r.stdout.decode()

    d = start_mongocdc("-c", cfg)
    wait_until(lambda: gap_ops(tmp_workdir / "run2.jsonl") == GAP, 60,
               "every change of the gap, deletes and tombstones included")
    log = log_text(tmp_workdir)
    writer = "Debezium 1.x" if layout == "1.9" else "Debezium 2.x-3.x"
    assert "adopted from key %s, written by %s" % (dkey, writer) in log, log[-3000:]
    if layout == "3.x":
        assert re.search(r"WARN .*the adopted offsets hold Debezium's open transaction "
                         r'\{"id": 1\}:7', log), log[-3000:]
    recs = read_jsonl(tmp_workdir / "run2.jsonl")
    assert not [r for r in recs if r.value is not None and r.op == "r"], "a snapshot was taken"
    assert d.stop(timeout_s=30) == 0

    # Stored under the layout's key (the Debezium key: same name, same partition form),
    # in the form that layout's Debezium resumes from.
    doc = json.loads(path.read_text())
    assert list(doc) == [dkey], doc
    v = doc[dkey]
    assert v["mongocdc_capture_mode"] == "change_streams"
    if layout == "1.9":
        assert "h" in v and v["h"] is None
        assert re.fullmatch(r"82[0-9A-F]+", v["resume_token"]), v
    else:
        assert "h" not in v
        assert "_data" in bson.decode(base64.b64decode(v["resume_token"])), v
    assert (v["sec"], v["ord"]) > (sec, ord_)


@pytest.mark.parametrize("layout", ["1.9", "3.x"])
def test_takes_over_a_connect_offsets_topic(tmp_workdir, users_sim, kafka, start_mongocdc, layout):
    """Debezium's entry (1.9.8 or 3.6.1) in a Kafka Connect offsets topic of
    25 partitions (placed by murmur2, as Connect's producer does), with
    another connector's entries around it."""
    import kafka_support
    sim = users_sim
    prefix = "dbz%s%d" % (layout.replace(".", ""), int(time.time()))
    token_doc, sec, ord_ = first_run_position(tmp_workdir, sim, start_mongocdc, layout, prefix)
    dkey, dvalue = debezium_entry(layout, token_doc, sec, ord_, prefix)
    topic = kafka_support.unique_topic("connect-offsets")
    kafka_support.create_topic(kafka, topic, partitions=25, config={"cleanup.policy": "compact"})
    kafka_support.produce(kafka, topic, [
        (b'["mysql-connector",{"server":"mysql1"}]', b'{"file":"binlog.000003","pos":154}'),
        (dkey.encode(), b'{"sec":1,"ord":1,"resume_token":null}'),  # an older record, compacted
        (dkey.encode(), dvalue.encode()),
    ], partitioner="murmur2_random")
    make_gap_changes(sim)
    # Offsets in Kafka go with the Kafka sink.
    cfg = write_config(tmp_workdir, sim.uri, name="run2.yaml",
                       kafka={"bootstrap.servers": kafka.bootstrap}, raw={"name": NAME},
                       **{"topic.prefix": prefix, "debezium.compatibility": layout,
                          "offsets.storage": "kafka", "offsets.topic": topic})
    d = start_mongocdc("-c", cfg)

    def recs():
        return read_topics(kafka.bootstrap, [prefix + ".itdb.gap", prefix + ".sample_mflix.users"],
                           idle_s=1.5, timeout_s=30)
    seen = []

    def gap_done():
        seen[:] = gap_ops(None, recs(), prefix)
        return seen == GAP
    try:
        wait_until(gap_done, 90, "every change of the gap")
    except TimeoutError as e:
        # What the topics held and what the daemon said, for a failure seen
        # only under load (the two halves of the suite running at once).
        raise AssertionError("%s: read %r, want %r; daemon running: %s; its log ends:\n%s"
                             % (e, seen, GAP, d.running(), log_text(tmp_workdir)[-4000:])) from e
    writer = "Debezium 1.x" if layout == "1.9" else "Debezium 2.x-3.x"
    assert "adopted from key %s, written by %s" % (dkey, writer) in log_text(tmp_workdir)
    assert not [r for r in recs() if r.value is not None and r.op == "r"], "a snapshot was taken"
    assert d.stop(timeout_s=30) == 0
    last = {}
    for rec in kafka_support.consume_all(kafka, topic):
        last[rec.key] = rec.value
    v = json.loads(last[dkey.encode()])
    assert v["mongocdc_capture_mode"] == "change_streams" and (v["sec"], v["ord"]) > (sec, ord_)
    if layout == "1.9":
        assert v["h"] is None and re.fullmatch(r"82[0-9A-F]+", v["resume_token"]), v


def test_stalled_stored_position_warns_and_shows_in_metrics(tmp_workdir, users_sim,
                                                            start_mongocdc):
    """No broker answers: records are never acknowledged, so the stored
    position stays while the stream reads on: one WARN after
    offsets.stall.threshold.ms and mongocdc_offset_stalled_seconds > 0."""
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = s.getsockname()[1]
    s.close()
    cfg = write_config(tmp_workdir, users_sim.uri, kafka={"bootstrap.servers": "127.0.0.1:%d" % dead},
                       **{"snapshot.mode": "no_data", "offsets.flush.timeout.ms": 1000,
                          "offsets.stall.threshold.ms": 1500, "metrics.enabled": True,
                          "metrics.http.port": 0})
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir, d)
    users_sim.client().itdb.stall.insert_one({"_id": 1})
    wait_until(lambda: "the stored position has not moved for" in log_text(tmp_workdir), 60,
               "the stalled-offsets WARN")
    port = int(re.search(r"metrics: listening on 127\.0\.0\.1 port (\d+)",
                         log_text(tmp_workdir)).group(1))

    def stalled():
        body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read()
        m = re.search(r'^mongocdc_offset_stalled_seconds\{[^}]*\} ([0-9.e+]+)$', body.decode(),
                      re.M)
        return m and float(m.group(1)) >= 1.5
    wait_until(stalled, 30, "mongocdc_offset_stalled_seconds above the threshold")
    d.stop(timeout_s=30)  # exit 1: records pending (test_faults covers it)
    log = log_text(tmp_workdir)
    assert len(re.findall(r"WARN .*the stored position has not moved for", log)) == 1, log[-3000:]
