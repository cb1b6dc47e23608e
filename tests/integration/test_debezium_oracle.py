"""Debezium's own MongoDB connector as a differential oracle (label `oracle`).

Debezium's embedded engine (tests/debezium: debezium-embedded and
debezium-connector-mongodb from Maven Central, built once into the build tree)
and mongocdc run side by side against one simulator: both snapshot the same
collection, then stream the same changes. Their records must be identical,
topic, key, value and headers byte for byte, once the wall-clock values are
set aside: the envelope's top-level `ts_ms`, a snapshot record's
`source.ts_ms`/`ts_us`/`ts_ns` (Debezium 3.1+ takes them from the clock) and
the runId header. A difference prints a report naming each differing record.

Workload: `_id`s of several BSON types, tricky values (unicode, control
characters, nested documents and arrays, int64, decimal, dates, binary), then
inserts, `$set`/`$unset`/`$push`, replace and delete, each document changed
once so that `updateLookup` gives the same `after` whatever the timing.
"""

import difflib
import json
import os
import re
import shutil
import subprocess
import time
import datetime
from pathlib import Path

import pytest
from bson.binary import Binary
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.objectid import ObjectId

from conftest import BUILD_DIR, SOURCE_DIR, wait_until
from pipeline_support import Sim, log_text, read_jsonl, write_config

POM_DIR = SOURCE_DIR / "tests" / "debezium"
VERSION = "3.6.1.Final"
PREFIX = "orc"


@pytest.fixture(scope="module")
def debezium():
    """(java, classpath) of the built harness; builds it with Maven on first use."""
    java, mvn = shutil.which("java"), shutil.which("mvn")
    if not java or not mvn:
        pytest.skip("skipped: the Debezium oracle needs Java 17+ and Maven")
    out = BUILD_DIR / "debezium-oracle" / VERSION
    repo = BUILD_DIR / "debezium-oracle" / "m2"
    built = out / "classes" / "org" / "mongocdc" / "dbzoracle" / "Run.class"
    src = POM_DIR / "src" / "main" / "java" / "org" / "mongocdc" / "dbzoracle" / "Run.java"
    if not built.exists() or built.stat().st_mtime < src.stat().st_mtime or not (out / "lib").is_dir():
        r = subprocess.run([mvn, "-q", "-B", "-Dmaven.test.skip=true",
                            "-Dmaven.repo.local=%s" % repo, "-Doracle.build.dir=%s" % out,
                            "-Ddebezium.version=%s" % VERSION, "package"],
                           cwd=POM_DIR, capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            pytest.fail("the Debezium oracle did not build:\n%s" % (r.stdout + r.stderr)[-3000:])
    return java, "%s:%s/*" % (out / "classes", out / "lib")


def _docs():
    return [
        {"_id": 1, "s": "plain", "n": 1},
        {"_id": Int64(2), "big": Int64(2 ** 40), "neg": Int64(-5)},
        {"_id": 3.5, "d": 1.0, "e": 1e-7, "f": -0.0, "g": 123456789.125},
        {"_id": "str-id", "u": "ünï\u00e9 \u2028 \"quoted\" \\ \t\n", "emoji": "\U0001F600"},
        {"_id": ObjectId("6553f1000000000000000001"), "nested": {"a": [1, {"b": None}], "c": {}}},
        {"_id": Decimal128("10.50"), "dec": Decimal128("-0.000001"), "arr": []},
        {"_id": {"k": 1, "j": "x"}, "when": datetime.datetime(2024, 2, 29, 12, 0, 0, 123000)},
        {"_id": Binary(b"\x00\x01\x02\x03" * 4, 4), "bin": Binary(b"\xff\x00", 0)},
        {"_id": "upd", "tags": ["a", "b", "c", "d"], "score": 1, "gone": True},
        {"_id": "rep", "v": 1},
        {"_id": "del", "v": 1},
    ]


def _changes(coll):
    coll.insert_one({"_id": "new", "ts": datetime.datetime(2001, 1, 1), "l": [1, 2, 3]})
    coll.insert_one({"_id": Int64(-(2 ** 62)), "x": Int64(2 ** 62)})
    coll.update_one({"_id": "upd"}, {"$set": {"score": 2, "sub.x": "y"}, "$unset": {"gone": ""},
                                     "$push": {"tags": "e"}})
    coll.update_one({"_id": 1}, [{"$set": {"tags": ["a"]}}])
    coll.replace_one({"_id": "rep"}, {"v": 2, "w": [{"x": 1}]})
    coll.delete_one({"_id": "del"})


def _norm(line):
    """One record with the wall-clock values replaced by markers."""
    rec = json.loads(line)
    v = rec.get("value")
    if isinstance(v, dict):
        payload = v.get("payload", v) if "schema" in v else v
        if isinstance(payload, dict) and "op" in payload:
            payload["ts_ms"] = "<wall>"
            src = payload.get("source") or {}
            if payload.get("op") == "r":
                for k in ("ts_ms", "ts_us", "ts_ns"):
                    if k in src:
                        src[k] = "<wall>"
    for h in ("__debezium.context.runId",):
        if h in (rec.get("headers") or {}):
            rec["headers"][h] = "<run>"
    return json.dumps(rec, ensure_ascii=False)


def _lines(path):
    p = Path(path)
    return [l.rstrip("\n") for l in p.read_text(encoding="utf-8").splitlines() if l.strip()] \
        if p.exists() else []


def _data(lines):
    return [l for l in lines if json.loads(l)["topic"].startswith(PREFIX + ".")]


def test_debezium_and_mongocdc_emit_identical_records(tmp_workdir, debezium, start_mongocdc):
    java, cp = debezium
    sim = Sim(tmp_workdir, members=1)
    try:
        c = sim.client()
        coll = c.oracledb.things
        coll.insert_many(_docs())
        props = tmp_workdir / "dbz.properties"
        props.write_text("\n".join([
            "name=oracle",
            "connector.class=io.debezium.connector.mongodb.MongoDbConnector",
            "mongodb.connection.string=%s" % sim.uri,
            "topic.prefix=%s" % PREFIX,
            "collection.include.list=oracledb\\\\.things",
            "offset.storage=org.apache.kafka.connect.storage.FileOffsetBackingStore",
            "offset.storage.file.filename=%s" % (tmp_workdir / "dbz-offsets.dat"),
            "offset.flush.interval.ms=500",
            "capture.mode=change_streams_update_full",
            "key.converter.schemas.enable=false",
            "value.converter.schemas.enable=false",
        ]) + "\n")
        dbz_out, stop = tmp_workdir / "dbz.jsonl", tmp_workdir / "dbz.stop"
        jerr = open(tmp_workdir / "dbz.stderr", "wb")
        jp = subprocess.Popen([java, "-cp", cp, "org.mongocdc.dbzoracle.Run", str(props),
                               str(dbz_out), str(stop)], stdout=jerr, stderr=subprocess.STDOUT)
        cfg = write_config(tmp_workdir, sim.uri, **{
            "topic.prefix": PREFIX, "debezium.compatibility": "3.x",
            "collection.include.list": "oracledb\\.things"})
        d = start_mongocdc("-c", cfg)
        n = len(_docs())
        wait_until(lambda: len(_data(_lines(dbz_out))) >= n and
                   len(_data(_lines(tmp_workdir / "events.jsonl"))) >= n, 120, "both snapshots")
        _changes(coll)
        want = n + 7  # 2 inserts, 2 updates, 1 replace, 1 delete + its tombstone
        wait_until(lambda: len(_data(_lines(dbz_out))) >= want and
                   len(_data(_lines(tmp_workdir / "events.jsonl"))) >= want, 120, "the changes")
        time.sleep(1)
        assert d.stop(timeout_s=30) == 0
        stop.write_text("")
        jp.wait(timeout=90)
        jerr.close()
    finally:
        sim.stop()
    theirs = [_norm(l) for l in _data(_lines(dbz_out))]
    ours = [_norm(l) for l in _data(_lines(tmp_workdir / "events.jsonl"))]
    if theirs != ours:
        report = "\n".join(difflib.unified_diff(theirs, ours, "debezium %s" % VERSION, "mongocdc",
                                                lineterm="", n=0))
        pytest.fail("records differ (%d from Debezium, %d from mongocdc):\n%s"
                    % (len(theirs), len(ours), report[-20000:]))
    print("debezium-oracle %s: %d records identical" % (VERSION, len(ours)))
