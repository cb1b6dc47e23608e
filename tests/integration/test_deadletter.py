"""errors.deadletterqueue.topic.name against a real broker: a record over
Kafka's size limit stops the daemon when the option is unset (naming the key
and the size), and goes to the dead-letter topic when it is set, with headers
saying why, the value (or only the metadata when even the value is too large),
the later records in order and the stored offset past it.

Two limits make records too large: the topic's max.message.bytes (the broker
refuses the record in the delivery report) and the producer's
message.max.bytes (1 MB, refused at produce time).
"""

import json
import re
import time
import urllib.request

import pytest

from conftest import wait_until
from kafka_support import create_topic
from pipeline_support import key_id_text, log_text, offsets_value, read_topics, write_config


def _setup(tmp_workdir, sim, kafka, prefix, **opts):
    """A topic that refuses records over 2000 bytes, a config streaming from
    now; returns (config path, data topic, client)."""
    if kafka.is_mock:
        pytest.skip("needs a real broker (topic max.message.bytes)")
    topic = create_topic(kafka, prefix + ".itdb.dl", config={"max.message.bytes": "2000"})
    c = sim.client()
    with c.start_session() as s:
        c.itdb.dl.insert_one({"_id": "before"}, session=s)
        ot = s.operation_time
    # one record per batch: a broker refuses a whole batch, and this test is
    # about the too-large record alone
    cfg = write_config(tmp_workdir, sim.uri,
                       kafka={"bootstrap.servers": kafka.bootstrap, "batch.num.messages": "1"},
                       **{"topic.prefix": prefix, "snapshot.mode": "no_data",
                          "capture.start.op.time": (ot.time << 32) | ot.inc}, **opts)
    return cfg, topic, c


def test_unset_stops_naming_key_and_size(tmp_workdir, users_sim, kafka, run_mongocdc):
    prefix = "dlq0x%d" % int(time.time())
    cfg, topic, c = _setup(tmp_workdir, users_sim, kafka, prefix)
    c.itdb.dl.insert_one({"_id": "big-doc", "blob": "x" * 5000})
    r = run_mongocdc("-c", cfg, timeout_s=90)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1, err[-2000:]
    assert "big-doc" in err and re.search(r"\d{4,} bytes too large", err), err[-2000:]
    off = offsets_value(tmp_workdir)
    assert not off or "big-doc" not in off


def _ids(recs):
    return [json.loads(key_id_text(r)) for r in recs if r.op == "c"]


def test_too_large_goes_to_the_dead_letter_topic(tmp_workdir, users_sim, kafka, start_mongocdc):
    prefix = "dlq1x%d" % int(time.time())
    dlq = create_topic(kafka, prefix + "-dlq") if not kafka.is_mock else None
    cfg, topic, c = _setup(tmp_workdir, users_sim, kafka, prefix,
                           **{"errors.deadletterqueue.topic.name": prefix + "-dlq",
                              "metrics.enabled": True, "metrics.http.port": 0})
    c.itdb.dl.insert_one({"_id": "a"})
    c.itdb.dl.insert_one({"_id": "big", "blob": "x" * 5000})        # over the topic's limit
    c.itdb.dl.insert_one({"_id": "b"})
    c.itdb.dl.insert_one({"_id": "huge", "blob": "y" * (1536 * 1024)})  # over the producer's
    c.itdb.dl.insert_one({"_id": "c"})
    d = start_mongocdc("-c", cfg)

    def data():
        recs = read_topics(kafka.bootstrap, [topic], idle_s=2, timeout_s=30)
        return recs if "c" in _ids(recs) else None
    recs = wait_until(data, 120, "the records after the too-large ones",
                      interval_s=2)
    assert _ids(recs) == ["before", "a", "b", "c"]  # in order, nothing else
    dl = read_topics(kafka.bootstrap, [dlq], idle_s=2, timeout_s=30)
    assert len(dl) == 2, [r.key for r in dl]
    # the producer refuses "huge" at once, the broker refuses "big" a moment
    # later: the dead-letter topic may hold them in either order
    by_id = {json.loads(key_id_text(r)): r for r in dl}
    big, huge = by_id["big"], by_id["huge"]
    h = dict(big.headers)
    assert json.loads(key_id_text(big)) == "big"
    assert h["__connect.errors.topic"] == topic and h["mongocdc.dlq.topic"] == topic
    assert h["mongocdc.dlq.reason"] == "MSG_SIZE_TOO_LARGE"
    assert "refused by the broker" in h["__connect.errors.exception.message"]
    assert h["mongocdc.dlq.value"] == "included"
    assert h["mongocdc.dlq.namespace"] == "itdb.dl" and '"big"' in h["mongocdc.dlq.id"]
    assert '"big"' in big.payload["after"] and "xxxx" in big.payload["after"]
    assert int(h["mongocdc.dlq.size"]) > 5000

    h = dict(huge.headers)
    assert json.loads(key_id_text(huge)) == "huge"
    assert h["mongocdc.dlq.value"] == "omitted"
    assert "message.max.bytes" in h["__connect.errors.exception.message"]
    meta = huge.value
    assert meta["topic"] == topic and meta["namespace"] == "itdb.dl"
    assert '"huge"' in meta["_id"] and meta["size"] > 1536 * 1024
    assert "huge" in meta["key"]

    log = log_text(tmp_workdir)
    port = int(re.search(r"metrics: listening on 127\.0\.0\.1 port (\d+)", log).group(1))
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        body = r.read().decode()
    assert re.search(r"^mongocdc_records_dead_lettered_total\{[^}]*\} 2$", body, re.M), body
    assert re.search(r"^mongocdc_records_failed_total\{[^}]*\} 0$", body, re.M), body
    assert len(re.findall(r"WARN .*too large: sent to the dead-letter topic", log)) == 2, log[-3000:]
    assert d.running(), log[-2000:]
    assert d.stop(timeout_s=60) == 0

    # the stored offset is past both: a restart sends neither again
    assert "huge" not in (offsets_value(tmp_workdir) or "")
    d = start_mongocdc("-c", cfg)
    c.itdb.dl.insert_one({"_id": "d"})
    wait_until(lambda: "d" in _ids(read_topics(kafka.bootstrap, [topic], idle_s=2,
                                               timeout_s=30)),
               120, "the record after the restart", interval_s=2)
    assert d.stop(timeout_s=60) == 0
    assert len(read_topics(kafka.bootstrap, [dlq], idle_s=2, timeout_s=30)) == 2
    assert _ids(read_topics(kafka.bootstrap, [topic], idle_s=2, timeout_s=30)) == \
        ["before", "a", "b", "c", "d"]


def test_refused_with_the_file_sink(tmp_workdir, users_sim, run_mongocdc):
    cfg = write_config(tmp_workdir, users_sim.uri,
                       **{"errors.deadletterqueue.topic.name": "dlq"})
    r = run_mongocdc("--validate", "-c", cfg, timeout_s=30)
    err = r.stderr.decode(errors="replace") + r.stdout.decode(errors="replace")
    assert r.returncode == 2 and "dead-letter" in err, err[-2000:]
