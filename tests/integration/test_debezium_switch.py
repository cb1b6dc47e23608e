"""Switching a running Debezium deployment to mongocdc and back (issue: no
re-snapshot, no lost change; docs/MIGRATING.md). Label `oracle` (Java, Maven
and a real broker from scripts/kafka-local.sh; the Debezium jars are the
oracle harness's, tests/debezium).

Each case: the connector is named differently from its prefix
(`inventory-connector`, prefix `dbserver1`).
  1. Debezium snapshots and streams, then stops.
  2. Changes while nothing runs (inserts, updates, a replace, deletes).
  3. mongocdc takes over, its configuration made by `mongocdc config convert`
     from the connector's own configuration: no `r` record; every gap change
     delivered (deletes and their tombstones included); anything else it
     emits is a replay of what Debezium had already delivered (at-least-once).
  4. Changes while mongocdc runs; mongocdc stops; changes again.
  5. Debezium takes over: no snapshot, every change of 4 delivered, its task
     keeps running (a value it cannot read fails the task, which a Kafka
     Connect worker reports while the connector still shows RUNNING).

Transports: a Kafka Connect DISTRIBUTED worker (offsets in its
connect-offsets topic, 25 partitions; mongocdc reads and writes that topic),
and Debezium's embedded engine with FileOffsetBackingStore (Debezium Server's
offsets file; mongocdc imports it with `mongocdc offsets copy` and exports it
back). Both layouts (Debezium 3.6.1 with Kafka Connect 4.3, 1.9.8 with Kafka
Connect 3.2), schemas on and off; four runs cover every pairing of transport
with layout and with schemas.
"""

import json
import shutil
import time
import uuid

import pytest
import yaml

from conftest import BUILD_DIR, SOURCE_DIR, wait_until
from dbz_switch_support import ConnectWorker, Engine, connector_config
from pipeline_support import Sim, read_jsonl, read_topics
from test_debezium_oracle import _harness

NAME = "inventory-connector"

CASES = [
    # transport, Debezium version, schemas.enable
    ("connect", "3.6.1.Final", False),
    ("connect", "1.9.8.Final", True),
    ("server-file", "3.6.1.Final", True),
    ("server-file", "1.9.8.Final", False),
]


@pytest.fixture(scope="module")
def broker():
    """A real broker: MCDC_TEST_KAFKA when it names one, else scripts/kafka-local.sh."""
    import os
    import kafka_support
    want = os.environ.get("MCDC_TEST_KAFKA", "").strip()
    if want and want != "mock":
        yield want
        return
    try:
        ep = kafka_support.start_local_broker(str(BUILD_DIR))
    except (RuntimeError, OSError) as e:
        pytest.skip("skipped: no real Kafka broker (%s)" % e)
    yield ep.bootstrap
    ep.close()


@pytest.fixture(autouse=True)
def _broker_answering(request):
    """Each case holds the broker's shared outage lock: the integration suite,
    running beside this test under ctest -j, freezes the broker for up to
    60 s in test_faults.py, and a Connect worker starting then exits."""
    if "broker" not in request.fixturenames:
        yield
        return
    import kafka_support
    with kafka_support.broker_outage_lock(request.getfixturevalue("broker"), exclusive=False):
        yield


def _ident(rec):
    """What makes two records the same event: topic, key, op and the value's payload
    without the wall-clock envelope ts_ms."""
    p = rec.payload
    if p is None:
        return (rec.topic, rec.key, "tombstone", None)
    return (rec.topic, rec.key, p.get("op"), p.get("after"),
            json.dumps(p.get("updateDescription"), sort_keys=True), p.get("filter"),
            p.get("patch"))


def _key_id(rec):
    k = json.loads(rec.key)
    return json.loads(k.get("payload", k)["id"])


def _expect(recs, changes, what):
    """Every (op, _id) of changes appears in recs; a d is followed by its tombstone."""
    got = [(r.op, _key_id(r)) for r in recs]
    for op, _id in changes:
        assert (op, _id) in got, "%s: %s of _id %r missing; got %s" % (what, op, _id, got)
        if op == "d":
            i = got.index(("d", _id))
            assert ("tombstone", _id) in got[i + 1:], "%s: no tombstone after the delete of %r" % (what, _id)


def _changes(coll, base):
    """Inserts, an update, a replace and two deletes; the updates and deletes hit
    original documents no earlier phase touched (phase base 100, 200, ...: _ids
    1-4, 6-9, 11-14, 16-19). Returns the expected (op, _id) list."""
    t = (base // 100 - 1) * 5
    coll.insert_one({"_id": base + 1, "v": "new"})
    coll.insert_one({"_id": base + 2, "v": "new"})
    coll.update_one({"_id": t + 1}, {"$set": {"v": "upd-%d" % base}})
    coll.replace_one({"_id": t + 2}, {"v": "rep-%d" % base})
    coll.delete_one({"_id": t + 3})
    coll.delete_one({"_id": t + 4})
    return [("c", base + 1), ("c", base + 2), ("u", t + 1), ("u", t + 2),
            ("d", t + 3), ("d", t + 4)]


def _mongocdc_config(workdir, run, source, worker_props, sink, log_level="info"):
    """mongocdc's YAML from Debezium's configuration through `mongocdc config
    convert`, plus the test's sink and quick intervals."""
    r = run("config", "convert", source, *(["--worker", worker_props] if worker_props else []))
    assert r.returncode == 0, r.stderr
    conf = yaml.safe_load(r.stdout)
    kafka = conf.pop("kafka")
    conf.update(sink)
    conf.update({"cursor.max.await.time.ms": 300, "offsets.flush.interval.ms": 200,
                 "log.level": log_level})
    if "sink.path" in sink:
        kafka = {}
    lines = ["%s: %s" % (k, json.dumps(v)) for k, v in conf.items()]
    if kafka:
        lines.append("kafka:")
        lines += ["  %s: %s" % (k, json.dumps(str(v))) for k, v in kafka.items()]
    p = workdir / "mongocdc.yaml"
    p.write_text("\n".join(lines) + "\n")
    v = run("--validate", "-c", p)
    assert v.returncode == 0, v.stderr
    return p, r.stderr.decode()


@pytest.mark.parametrize("transport,version,schemas", CASES,
                         ids=["%s-%s-schemas-%s" % (t, v, "on" if s else "off") for t, v, s in CASES])
def test_switch_debezium_to_mongocdc_and_back(tmp_workdir, start_mongocdc, run_mongocdc, broker,
                                              transport, version, schemas):
    java, cp = _harness(version)
    lib = str(BUILD_DIR / "debezium-oracle" / version / "lib")
    v1 = version.startswith("1.")
    sim = Sim(tmp_workdir, members=1, extra=["--server-version", "5.0" if v1 else "6.0"])
    prefix = "dbserver1x%s" % uuid.uuid4().hex[:6]  # topics unique to this run
    topic = prefix + ".inventory.customers"
    include = "inventory\\.customers"
    dbz = daemon = None
    try:
        coll = sim.client().inventory.customers
        coll.insert_many([{"_id": i, "v": "orig"} for i in range(1, 40)])
        cfg = connector_config(version, sim.uri, prefix, schemas, include)
        group = "connect-" + prefix
        offsets_topic = group + "-offsets"
        events = tmp_workdir / "mongocdc-events.jsonl"
        dbz_out = tmp_workdir / "dbz-events.jsonl"
        dbz_offsets = tmp_workdir / "dbz-offsets.dat"

        def debezium(n):
            if transport == "connect":
                w = ConnectWorker(java, lib, tmp_workdir, broker, group, offsets_topic, schemas, n)
                w.register(NAME, cfg)
                return w
            return Engine(java, cp, tmp_workdir, NAME, cfg, dbz_offsets, dbz_out, n)

        def dbz_records():
            if transport == "connect":
                return read_topics(broker, [topic], idle_s=2)
            return [r for r in read_jsonl(dbz_out) if r.topic == topic]

        def ours_records():
            if transport == "connect":
                return read_topics(broker, [topic], idle_s=2)
            return [r for r in read_jsonl(events) if r.topic == topic]

        # 1. Debezium snapshots and streams, then stops
        dbz = debezium(1)
        wait_until(lambda: len(dbz_records()) >= 39, 180, "Debezium's snapshot")
        time.sleep(2)
        first = _changes(coll, 100)
        wait_until(lambda: len(dbz_records()) >= 39 + 8, 120, "Debezium streaming")
        time.sleep(2)  # its offsets flushed
        dbz.stop()
        dbz = None
        before = dbz_records()
        assert sum(1 for r in before if r.op == "r") == 39
        _expect(before, first, "Debezium phase 1")

        # 2. the gap
        gap = _changes(coll, 200)

        # 3. mongocdc takes over
        if transport == "connect":
            source = tmp_workdir / "connector.json"
            source.write_text(json.dumps({"name": NAME, "config": cfg}))
            sink = {"sink.type": "kafka"}
            mcfg, notes = _mongocdc_config(tmp_workdir, run_mongocdc, source,
                                           tmp_workdir / "worker-1.properties", sink)
        else:
            source = tmp_workdir / "application.properties"
            lines = ["debezium.sink.type=kafka", "debezium.source.name=%s" % NAME,
                     "debezium.source.offset.storage.file.filename=%s" % dbz_offsets,
                     "debezium.format.key.schemas.enable=%s" % str(schemas).lower(),
                     "debezium.format.value.schemas.enable=%s" % str(schemas).lower()]
            lines += ["debezium.source.%s=%s" % (k, v.replace("\\", "\\\\")) for k, v in cfg.items()]
            source.write_text("\n".join(lines) + "\n")
            sink = {"sink.type": "file", "sink.path": str(events),
                    "offsets.file.path": str(tmp_workdir / "offsets.json")}
            mcfg, notes = _mongocdc_config(tmp_workdir, run_mongocdc, source, None, sink)
            r = run_mongocdc("offsets", "copy", "-c", mcfg, "--from", "debezium-file:%s" % dbz_offsets,
                             "--to", "store")
            assert r.returncode == 0, r.stderr
        shown = run_mongocdc("offsets", "show", "-c", mcfg, timeout_s=90)
        assert shown.returncode == 0, shown.stderr
        assert b"this config:   yes" in shown.stdout, (notes, shown.stdout.decode())
        # `mongocdc check` names the adopted key and its writer (docs/MIGRATING.md)
        checked = run_mongocdc("check", "-c", mcfg, timeout_s=120).stdout.decode()
        line = [l for l in checked.splitlines() if " offsets: " in l or l.endswith(" offsets")]
        assert any(l.startswith("PASS") and '["%s",' % NAME in l and "Debezium" in l
                   for l in line), checked
        n_before = len(ours_records()) if transport == "connect" else 0
        daemon = start_mongocdc("-c", mcfg)
        wait_until(lambda: len(ours_records()) >= n_before + 8, 120,
                   "mongocdc delivering the gap: " + daemon.stderr()[-3000:])
        time.sleep(2)
        during = _changes(coll, 300)
        wait_until(lambda: len(ours_records()) >= n_before + 16, 120, "mongocdc streaming")
        time.sleep(1)
        assert daemon.stop(timeout_s=60) == 0
        daemon = None
        ours = ours_records()[n_before:]
        assert not [r for r in ours if r.op == "r"], "mongocdc snapshotted again"
        _expect(ours, gap, "mongocdc, the gap")
        _expect(ours, during, "mongocdc, streaming")
        delivered = {_ident(r) for r in before}
        expected_ids = {i for _, i in gap + during}
        extra = [r for r in ours if _key_id(r) not in expected_ids and _ident(r) not in delivered]
        assert not extra, "mongocdc emitted records that are neither new nor a replay: %s" % [
            (r.op, r.key) for r in extra]

        # 4. changes while nothing runs; 5. Debezium takes over again
        gap2 = _changes(coll, 400)
        if transport == "server-file":
            r = run_mongocdc("offsets", "copy", "-c", mcfg, "--from", "store",
                             "--to", "debezium-file:%s" % dbz_offsets)
            assert r.returncode == 0, r.stderr
        n_dbz = len(dbz_records())
        dbz = debezium(2)
        wait_until(lambda: len(dbz_records()) >= n_dbz + 8, 120, "Debezium delivering the gap")
        time.sleep(3)
        if transport == "connect":
            assert dbz.task_state(NAME) == "RUNNING"
        else:
            assert dbz.proc.poll() is None, dbz.log_text()[-3000:]
        back = dbz_records()[n_dbz:]
        dbz.stop()
        log = dbz.log_text()
        dbz = None
        assert "FailedToParse" not in log, log[-3000:]
        assert not [r for r in back if r.op == "r"], "Debezium snapshotted again"
        _expect(back, gap2, "Debezium, the second gap")
        delivered |= {_ident(r) for r in ours}
        expected2 = {i for _, i in gap2}
        extra = [r for r in back if _key_id(r) not in expected2 and _ident(r) not in delivered]
        assert not extra, "Debezium emitted records that are neither new nor a replay: %s" % [
            (r.op, r.key) for r in extra]
        print("switch %s %s schemas=%s: Debezium %d records, mongocdc %d, Debezium again %d"
              % (transport, version, schemas, len(before), len(ours), len(back)))
    finally:
        if daemon is not None:
            daemon.stop(timeout_s=30)
        if dbz is not None:
            dbz.stop()
        sim.stop()


@pytest.mark.parametrize("version", ["3.6.1.Final", "1.9.8.Final"])
def test_debezium_offsets_file_round_trip_with_kafka_class(tmp_workdir, run_mongocdc, version):
    """mongocdc's FileOffsetBackingStore files against Kafka's own class (Kafka
    Connect 4.3 for Debezium 3.6.1, 3.2 for 1.9.8): a file mongocdc writes is
    loaded by the class with the same entries, and a file the class writes (a
    null value included) is read by mongocdc."""
    import base64
    import subprocess
    java, cp = _harness(version)
    cfg = tmp_workdir / "c.yaml"
    cfg.write_text("topic.prefix: dbserver1\nmongodb.connection.string: \"mongodb://h:1/?replicaSet=rs0\"\n"
                   "sink:\n  type: stdout\noffsets:\n  file.path: %s\n" % (tmp_workdir / "o.json"))
    entries = {'["inventory-connector",{"server_id":"dbserver1"}]':
               '{"sec":1700000000,"ord":3,"resume_token":"gQAAAAJfZGF0YQ=="}',
               '["inventory-connector",{"rs":"rs0","server_id":"dbserver1"}]':
               '{"sec":1700000001,"ord":1,"h":null,"resume_token":"82655B1C000000032B0229296E04"}',
               '["other",{"server_id":"x"}]': 'null'}
    # the class writes, mongocdc reads
    java_file = tmp_workdir / "java.dat"
    r = subprocess.run([java, "-cp", cp, "org.mongocdc.dbzoracle.OffsetFile", "write", str(java_file)],
                       input="".join("%s\t%s\n" % kv for kv in entries.items()).encode(),
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    r = run_mongocdc("offsets", "export", "-c", cfg, "--from", "debezium-file:%s" % java_file)
    assert r.returncode == 0, r.stderr
    got = {json.loads(l)["key"]: json.dumps(json.loads(l)["value"], separators=(",", ":"))
           for l in r.stdout.decode().splitlines()}
    assert got == {k: v for k, v in entries.items() if v != "null"}
    # mongocdc writes (through its store), the class reads
    r = run_mongocdc("offsets", "copy", "-c", cfg, "--from", "debezium-file:%s" % java_file,
                     "--to", "store")
    assert r.returncode == 0, r.stderr
    ours = tmp_workdir / "ours.dat"
    r = run_mongocdc("offsets", "copy", "-c", cfg, "--from", "store", "--to", "debezium-file:%s" % ours)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([java, "-cp", cp, "org.mongocdc.dbzoracle.OffsetFile", "read", str(ours)],
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    back = {}
    for line in r.stdout.decode().splitlines():
        k, v = line.split("\t")
        back[base64.b64decode(k).decode()] = base64.b64decode(v).decode()
    assert back == {k: v for k, v in entries.items() if v != "null"}
