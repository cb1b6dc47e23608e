"""Debezium's own MongoDB connector as a differential oracle (label `oracle`).

Debezium's embedded engine (tests/debezium: debezium-embedded and
debezium-connector-mongodb from Maven Central, built once into the build tree)
and mongocdc run side by side against one simulator: both snapshot the same
collection, then stream the same changes. Their records must be identical,
topic, key, value and headers byte for byte, once the wall-clock values are
set aside: the envelope's top-level `ts_ms`, a 3.x snapshot record's
`source.ts_ms`/`ts_us`/`ts_ns` (Debezium 3.1+ takes them from the clock) and
the runId header. Both layouts (1.9.8.Final on the 5.0 profile, whose driver
predates newer servers; 3.6.1.Final on 6.0 with pre-images), schemas on and
off, and a restart of both in the middle. A difference prints a report naming each differing record.

Workload: `_id`s of every BSON type an `_id` can have (int32, int64 down to
-2^63, double, decimal, string, ObjectId, document, binary, date, timestamp,
boolean, MinKey, MaxKey), tricky values (unicode, control characters, nested
documents and arrays, NaN, -inf, regex, code, a subtype-3 binary), then
inserts, `$set`/`$unset`/`$push`, a pipeline update, replace and delete, then
after the restart a multi-document transaction and an array truncation; each
document changed once per phase so that `updateLookup` gives the same `after`
whatever the timing.
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
from bson.code import Code
from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.objectid import ObjectId
from bson.regex import Regex
from bson.timestamp import Timestamp

from conftest import BUILD_DIR, SOURCE_DIR, wait_until
from pipeline_support import Sim, log_text, read_jsonl, write_config

POM_DIR = SOURCE_DIR / "tests" / "debezium"
VERSION = "3.6.1.Final"
PREFIX = "orc"


CASES = [
    # (Debezium version, schemas.enable, simulator profile, capture.mode.full.update.type):
    # 1.9's driver predates 6.0; post_image makes `after` exact even for a document
    # changed twice and deleted right away
    ("3.6.1.Final", False, "6.0", "lookup"),
    ("3.6.1.Final", True, "6.0", "lookup"),
    ("3.6.1.Final", False, "6.0", "post_image"),
    ("1.9.8.Final", False, "5.0", "lookup"),
    ("1.9.8.Final", True, "5.0", "lookup"),
]


def _harness(version):
    """(java, classpath) of the harness built against `version`; built with Maven on
    first use into the build tree."""
    java, mvn = shutil.which("java"), shutil.which("mvn")
    if not java or not mvn:
        pytest.skip("skipped: the Debezium oracle needs Java 17+ and Maven")
    out = BUILD_DIR / "debezium-oracle" / version
    repo = BUILD_DIR / "debezium-oracle" / "m2"
    classes = out / "classes" / "org" / "mongocdc" / "dbzoracle"
    java_dir = POM_DIR / "src" / "main" / "java" / "org" / "mongocdc" / "dbzoracle"
    # rebuilt when a source or the pom (its dependencies) is newer than a class
    newest = max(p.stat().st_mtime for p in list(java_dir.glob("*.java")) + [POM_DIR / "pom.xml"])
    built = [classes / (p.stem + ".class") for p in java_dir.glob("*.java")]
    if (not all(b.exists() for b in built) or min(b.stat().st_mtime for b in built) < newest
            or not (out / "lib").is_dir()):
        r = subprocess.run([mvn, "-q", "-B", "-Dmaven.test.skip=true",
                            "-Dmaven.repo.local=%s" % repo, "-Doracle.build.dir=%s" % out,
                            "-Ddebezium.version=%s" % version, "package"],
                           cwd=POM_DIR, capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            pytest.fail("the Debezium %s oracle did not build:\n%s" % (version, (r.stdout + r.stderr)[-3000:]))
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
        {"_id": Binary(b"\x00\x01\x02\x03" * 4, 4), "bin": Binary(b"\xff\x00", 0),
         "legacy_uuid": Binary(b"\x10\x11\x12\x13" * 4, 3)},
        {"_id": "upd", "tags": ["a", "b", "c", "d"], "score": 1, "gone": True},
        {"_id": "rep", "v": 1},
        {"_id": "del", "v": 1},
        {"_id": "twice", "v": 0},
        {"_id": datetime.datetime(2020, 5, 17, 1, 2, 3, 4000), "kind": "date id"},
        {"_id": {"x": [1, 2]}, "kind": "document id holding an array"},
        {"_id": MinKey(), "kind": "minkey"},
        {"_id": MaxKey(), "kind": "maxkey"},
        {"_id": Timestamp(1700000000, 5), "t": Timestamp(1, 2), "re": Regex("^a.*b$", "i")},
        {"_id": Binary(b"\x01\x02", 0), "code": Code("function() { return 1; }")},
        {"_id": True, "nan": float("nan"), "inf": float("-inf")},
    ]


def _changes_1(client, coll):
    """7 data records + 1 tombstone."""
    coll.insert_one({"_id": "new", "ts": datetime.datetime(2001, 1, 1), "l": [1, 2, 3]})
    coll.insert_one({"_id": Int64(-(2 ** 62)), "x": Int64(2 ** 62)})
    coll.insert_one({"_id": Int64(-(2 ** 63)), "min": Int64(-(2 ** 63))})
    coll.update_one({"_id": "upd"}, {"$set": {"score": 2, "sub.x": "y"}, "$unset": {"gone": ""},
                                     "$push": {"tags": "e"}})
    coll.update_one({"_id": 1}, [{"$set": {"tags": ["a"]}}])
    coll.replace_one({"_id": "rep"}, {"v": 2, "w": [{"x": 1}]})
    coll.delete_one({"_id": "del"})
    return 8


def _changes_2(client, coll):
    """After the restart: a transaction and array truncation; 5 data records + 1 tombstone."""
    with client.start_session() as s:
        with s.start_transaction():
            coll.insert_one({"_id": "tx1", "v": 1}, session=s)
            coll.insert_one({"_id": "tx2", "v": 2}, session=s)
            coll.update_one({"_id": "str-id"}, {"$set": {"in_txn": True}}, session=s)
    coll.update_one({"_id": "new"}, [{"$set": {"l": {"$slice": ["$l", 1]}}}])  # truncation
    coll.delete_one({"_id": 3.5})
    return 6


_TOP_TS = re.compile(r'("op":"[a-z]","ts_ms":)-?[0-9]+')
_SNAP_TS = re.compile(r'("ts_ms":)[0-9]+(,"snapshot":"(?:true|last)")')
_SNAP_US = re.compile(r'"ts_us":[0-9]+,"ts_ns":[0-9]+')
_RUN_ID = re.compile(r'("__debezium\.context\.runId": ")[0-9a-f-]+"')


def _norm(line):
    """The record's bytes with only the wall-clock values replaced by markers. The
    patterns need unescaped quotes, so they never match inside the documents' JSON
    strings (after, before, updateDescription), where quotes are escaped."""
    line = _TOP_TS.sub(r'\1"<wall>"', line)
    if '"op":"r"' in line and '"ts_us":' in line:
        # 3.1+ stamps snapshot records with the clock (they have ts_us); 1.9 with the
        # snapshot's start position, which must match as it is
        line = _SNAP_TS.sub(r'\1"<wall>"\2', line)
        line = _SNAP_US.sub('"ts_us":"<wall>","ts_ns":"<wall>"', line)
    return _RUN_ID.sub(r'\1<run>"', line)


def _lines(path):
    """Complete lines of a JSON-lines file (a line still being written is left out)."""
    p = Path(path)
    if not p.exists():
        return []
    return [l for l in p.read_text(encoding="utf-8").split("\n")[:-1] if l.strip()]


def _data(lines):
    return [l for l in lines if json.loads(l)["topic"].startswith(PREFIX + ".")]


def _changes_post_image(client, coll):
    """Only with post_image: two updates and a delete in a row (4 records with the tombstone);
    updateLookup would give `after` of the later state, or null."""
    coll.update_one({"_id": "twice"}, {"$set": {"v": 1}})
    coll.update_one({"_id": "twice"}, {"$inc": {"v": 1}})
    coll.delete_one({"_id": "twice"})
    return 4


def _props(path, version, uri, schemas, offsets, full_update):
    lines = ["name=oracle",
             "connector.class=io.debezium.connector.mongodb.MongoDbConnector",
             "offset.storage=org.apache.kafka.connect.storage.FileOffsetBackingStore",
             "offset.storage.file.filename=%s" % offsets,
             "offset.flush.interval.ms=200",
             "collection.include.list=oracledb\\\\.things",
             "key.converter.schemas.enable=%s" % str(schemas).lower(),
             "value.converter.schemas.enable=%s" % str(schemas).lower()]
    if version.startswith("1."):
        # 1.9: seeds as rs/host:port and mongodb.name (debezium-format.md §7.1)
        hostport = re.match(r"mongodb://([^/?]+)", uri).group(1)
        lines += ["mongodb.hosts=rs0/%s" % hostport, "mongodb.name=%s" % PREFIX,
                  "capture.mode=change_streams_update_full"]
    else:
        lines += ["mongodb.connection.string=%s" % uri, "topic.prefix=%s" % PREFIX,
                  "capture.mode=change_streams_update_full_with_pre_image",
                  "capture.mode.full.update.type=%s" % full_update]
    path.write_text("\n".join(lines) + "\n")


class _Debezium:
    """Run.java over props, writing JSON lines to out, until its stop file
    appears (stop()); tag names its files in workdir."""

    def __init__(self, java, cp, props, out, workdir, n, tag="dbz", log_suffix="stderr"):
        self.stop_file = workdir / ("%s-%d.stop" % (tag, n))
        self.err_path = workdir / ("%s-%d.%s" % (tag, n, log_suffix))
        self.err = open(self.err_path, "wb")
        self.proc = subprocess.Popen([java, "-cp", cp, "org.mongocdc.dbzoracle.Run", str(props),
                                      str(out), str(self.stop_file)],
                                     stdout=self.err, stderr=subprocess.STDOUT)

    def stop(self):
        self.stop_file.write_text("")
        try:
            self.proc.wait(timeout=90)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=30)
            self.err.close()


@pytest.mark.parametrize("version,schemas,profile,full_update", CASES,
                         ids=["%s-schemas-%s-%s" % (v, "on" if s else "off", f)
                              for v, s, _, f in CASES])
def test_debezium_and_mongocdc_emit_identical_records(tmp_workdir, start_mongocdc, version,
                                                      schemas, profile, full_update):
    java, cp = _harness(version)
    extra = ["--server-version", profile] + (["--pre-images"] if profile >= "6.0" else [])
    sim = Sim(tmp_workdir, members=1, extra=extra)
    dbz_out, ours_out = tmp_workdir / "dbz.jsonl", tmp_workdir / "events.jsonl"
    dialect = "1.9" if version.startswith("1.") else "3.x"
    dbz = None
    try:
        c = sim.client()
        coll = c.oracledb.things
        coll.insert_many(_docs())
        props = tmp_workdir / "dbz.properties"
        _props(props, version, sim.uri, schemas, tmp_workdir / "dbz-offsets.dat", full_update)
        cfg = write_config(tmp_workdir, sim.uri, **{
            "topic.prefix": PREFIX, "debezium.compatibility": dialect,
            "collection.include.list": "oracledb\\.things",
            "key.converter.schemas.enable": schemas, "value.converter.schemas.enable": schemas,
            "capture.mode": "change_streams_update_full" if dialect == "1.9"
            else "change_streams_update_full_with_pre_image",
            "capture.mode.full.update.type": full_update})

        def both_have(n, what):
            wait_until(lambda: len(_data(_lines(dbz_out))) >= n and
                       len(_data(_lines(ours_out))) >= n, 120, what)

        want = len(_docs())
        # phase 1: snapshot, then changes; both stop cleanly
        dbz, d = _Debezium(java, cp, props, dbz_out, tmp_workdir, 1), start_mongocdc("-c", cfg)
        both_have(want, "both snapshots")
        want += _changes_1(c, coll)
        if full_update == "post_image":
            want += _changes_post_image(c, coll)
        both_have(want, "the first changes")
        time.sleep(1)  # offsets flushed by both
        assert d.stop(timeout_s=30) == 0
        dbz.stop()
        dbz = None
        # phase 2: both resume from their offsets and stream what follows
        dbz, d = _Debezium(java, cp, props, dbz_out, tmp_workdir, 2), start_mongocdc("-c", cfg)
        wait_until(lambda: "streaming changes from" in log_text(tmp_workdir), 60,
                   "mongocdc streaming again")
        time.sleep(3)  # Debezium's task start
        want += _changes_2(c, coll)
        both_have(want, "the changes after the restart")
        time.sleep(1)
        assert d.stop(timeout_s=30) == 0
        dbz.stop()
        dbz = None
    finally:
        if dbz is not None:
            dbz.stop()  # after a failed wait: stop Debezium before the simulator
        sim.stop()
    theirs = [_norm(l) for l in _data(_lines(dbz_out))]
    ours = [_norm(l) for l in _data(_lines(ours_out))]
    if theirs != ours:
        report = "\n".join(difflib.unified_diff(theirs, ours, "debezium %s" % version, "mongocdc",
                                                lineterm="", n=0))
        pytest.fail("records differ (%d from Debezium, %d from mongocdc):\n%s"
                    % (len(theirs), len(ours), report[-20000:]))
    print("debezium-oracle %s schemas=%s %s: %d records identical"
          % (version, schemas, full_update, len(ours)))
