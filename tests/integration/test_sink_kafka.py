"""The sink and the Kafka offset store against the suite's Kafka (a real
broker by default, the mock cluster when MCDC_TEST_KAFKA=mock), driven by
tests/unit/sink_driver.c without the rest of the daemon:

  * records keep their exact key and value bytes, tombstones stay null, and
    the order of one partition is the produce order (idempotent, acks=all);
  * a record the broker refuses as too large is an error naming the key and
    the size, not a silent drop;
  * the offsets topic is created compacted, holds Kafka Connect's key bytes
    ["<prefix>",{"rs":"<rs>","server_id":"<prefix>"}], and a load returns the
    last value saved.
"""

import base64
import json
import os
import subprocess
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

import kafka_support

SOURCE_DIR = Path(os.environ.get("MCDC_SOURCE_DIR") or Path(__file__).resolve().parents[2])
BUILD_DIR = Path(os.environ.get("MCDC_BUILD_DIR") or SOURCE_DIR / "build")


@pytest.fixture(scope="module")
def driver() -> Path:
    p = BUILD_DIR / "tests" / "unit" / "mcdc_sink_driver"
    if not (p.is_file() and os.access(p, os.X_OK)):
        pytest.fail("mcdc_sink_driver not built at %s (set MCDC_BUILD_DIR)" % p)
    return p


def _run(driver, *args, stdin=b"", timeout_s=90):
    return subprocess.run([str(driver), *[str(a) for a in args]], input=stdin,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout_s)


def _lines(records):
    return b"".join(b"%s %s\n" % (k.hex().encode(), b"-" if v is None else v.hex().encode())
                    for k, v in records)


def test_records_keep_exact_bytes_and_order(kafka, driver):
    topic = kafka_support.create_topic(kafka, kafka_support.unique_topic("mcdc-sink"))
    sent = []
    for i in range(300):
        key = json.dumps({"id": json.dumps({"$oid": "%024x" % (0x6500 + i % 17)})},
                         separators=(",", ":")).encode()
        value = None if i % 9 == 4 else json.dumps(
            {"after": "{\"_id\": %d, \"n\": \"caf\u00e9 \\\"q\\\"\"}" % i, "op": "c"},
            ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        sent.append((key, value))
    r = _run(driver, "produce", kafka.bootstrap, topic, stdin=_lines(sent))
    assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()[-2000:]
    assert b"acked 300 failed 0" in r.stdout
    got = kafka_support.consume_all(kafka, topic, min_count=300)
    assert len(got) == 300
    def norm(kv):
        return (kv[0], b"" if kv[1] is None else kv[1], kv[1] is None)
    assert sorted(norm((g.key, g.value)) for g in got) == sorted(norm(x) for x in sent)
    # Per key, the produce order (a key always maps to one partition).
    for key in {k for k, _ in sent}:
        assert [g.value for g in got if g.key == key] == [v for k, v in sent if k == key]


def test_oversize_record_is_an_error_naming_key_and_size(kafka, driver):
    if kafka.is_mock:
        pytest.skip("the mock cluster has no per-topic max.message.bytes (the unit test covers "
                    "the producer-side limit and an injected broker refusal)")
    topic = kafka_support.create_topic(kafka, kafka_support.unique_topic("mcdc-big"),
                                       config={"max.message.bytes": "2000"})
    key = b'{"id":"{\\"$oid\\": \\"64b7aaaabbbbccccddddeeee\\"}"}'
    records = [(b'{"id":"1"}', b'{"op":"c"}'), (key, b'"' + b"x" * 5000 + b'"')]
    r = _run(driver, "produce", kafka.bootstrap, topic, stdin=_lines(records))
    out = r.stdout.decode()
    assert r.returncode == 1, out
    # The broker refuses the whole batch, so the small record sent with it may
    # fail too (librdkafka does not split batches); each failure names its own
    # record, and none is reported as delivered.
    err = [l for l in out.splitlines() if l.startswith("error: ")]
    big = [l for l in err if key.decode() in l]
    assert len(big) == 1, out
    assert "record of %d bytes too large (refused by the broker" % (len(key) + 5002) in big[0]
    assert "topic " + topic in big[0]
    assert "acked %d failed %d" % (2 - len(err), len(err)) in out


def test_offsets_topic_is_compacted_with_connect_keys(kafka, driver):
    otopic = kafka_support.unique_topic("mcdc-offsets")
    for sec, ord_, data in ((100, 1, "82AA01"), (100, 2, "82AA02")):
        r = _run(driver, "offsets-save", kafka.bootstrap, otopic, "shop", "rs0", sec, ord_, data)
        assert r.returncode == 0 and b"saved" in r.stdout, r.stdout + r.stderr[-2000:]
    r = _run(driver, "offsets-save", kafka.bootstrap, otopic, "shop", "rs1", 7, 1, "82BB")
    assert r.returncode == 0, r.stdout

    recs = kafka_support.consume_all(kafka, otopic, min_count=3)
    keys = [x.key for x in recs]
    assert keys.count(b'["shop",{"rs":"rs0","server_id":"shop"}]') == 2
    assert keys.count(b'["shop",{"rs":"rs1","server_id":"shop"}]') == 1
    last = json.loads([x.value for x in recs if b'"rs0"' in x.key][-1])
    assert (last["sec"], last["ord"]) == (100, 2)
    assert base64.b64decode(last["resume_token"])[4:] == b"\x02_data\x00\x07\x00\x00\x0082AA02\x00\x00"

    r = _run(driver, "offsets-load", kafka.bootstrap, otopic, "shop", "rs0")
    assert r.returncode == 0, r.stdout
    loaded = json.loads(r.stdout.decode().strip().splitlines()[-1])
    assert (loaded["sec"], loaded["ord"]) == (100, 2)
    r = _run(driver, "offsets-load", kafka.bootstrap, otopic, "shop", "rs9")
    assert r.stdout.decode().strip().splitlines()[-1] == "none"

    if kafka.is_mock:
        return  # no topic configs on the mock cluster
    admin = AdminClient(kafka.config())
    res = ConfigResource(ConfigResource.Type.TOPIC, otopic)
    cfg = admin.describe_configs([res])[res].result(timeout=30)
    assert cfg["cleanup.policy"].value == "compact"
