"""Differential test of the extended-JSON writer against the Java driver.

The same BSON documents go through `mongocdc encode` and through the MongoDB
Java driver's JsonWriter (tests/oracle, org.bson at the versions Debezium 1.9
and 3.x ship) with Debezium's settings (debezium-format.md §2.1); the outputs
must be byte-identical, document by document:

  strict   STRICT, compact separators       (after / before / patch / filter)
  relaxed  RELAXED, compact separators
  default  RELAXED, default separators      (legacy updatedFields)
  key      the `{"_": <_id>}` key text       (key id, §1.1)
  document STRICT compact through org.bson.Document, Debezium 1.9's `after`

The harness decodes each document into a BsonDocument (or Document) first,
as the driver hands it to Debezium; both are maps, so repeated field names
collapse (first position, last value) and the writer must do the same.

Inputs: every document of ../shared/datasets (converted file by file with
bson.json_util.loads), 10,000 generated documents covering every BSON type
(tests/gen/gen_docs.py, fixed seed), every BMP code point, and strings with
invalid UTF-8. Zero differences are allowed.

The oracle needs Java 17+ and Maven (first build online: Maven Central; the
jars land in tests/oracle/target, git-ignored). Without Java the tests skip
with "skipped: no Java".
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SOURCE_DIR = Path(os.environ.get("MCDC_SOURCE_DIR") or Path(__file__).resolve().parents[2])
BUILD_DIR = Path(os.environ.get("MCDC_BUILD_DIR") or SOURCE_DIR / "build")
SHARED_DIR = Path(os.environ.get("MCDC_SHARED_DIR") or SOURCE_DIR.parent / "shared")
ORACLE_DIR = SOURCE_DIR / "tests" / "oracle"
GEN = SOURCE_DIR / "tests" / "gen" / "gen_docs.py"

DRIVERS = ["4.3.4", "4.11.1"]
# In the order the harness prints them with "all".
VARIANTS = {
    "strict": ["--mode", "strict", "--separators", "compact"],
    "relaxed": ["--mode", "relaxed", "--separators", "compact"],
    "default": ["--mode", "relaxed", "--separators", "default"],
    "key": ["--key"],
    "document": ["--mode", "strict", "--separators", "compact"],
}
GENERATED_COUNT = 10000
GENERATED_SEED = 20240917
SETS = ["datasets", "generated", "bmp", "invalid_utf8"]


def _encoder_cmd():
    """The command that runs the writer's CLI: $MCDC_BIN encode, or the
    stand-alone front end built with the unit tests."""
    candidates = []
    if os.environ.get("MCDC_BIN"):
        candidates.append(Path(os.environ["MCDC_BIN"]))
    candidates += [BUILD_DIR / "mongocdc", BUILD_DIR / "tests" / "unit" / "mcdc_encode_cli"]
    for c in candidates:
        if not c.is_file():
            continue
        probe = subprocess.run([str(c), "encode", "--mode", "strict"], input=b"",
                               capture_output=True, timeout=30)
        if probe.returncode == 0:
            return [str(c), "encode"]
    pytest.fail("no binary with a working `encode` subcommand among %s"
                % ", ".join(str(c) for c in candidates))


@pytest.fixture(scope="module")
def oracle():
    """Classpath prefix of the Java oracle; builds it with Maven if needed."""
    java = shutil.which("java")
    if not java:
        pytest.skip("skipped: no Java")
    classes = ORACLE_DIR / "target" / "classes"
    jars = [ORACLE_DIR / "target" / "lib" / ("bson-%s.jar" % v) for v in DRIVERS]
    source = ORACLE_DIR / "src" / "main" / "java" / "org" / "mongocdc" / "oracle" / "Oracle.java"
    built = classes / "org" / "mongocdc" / "oracle" / "Oracle.class"
    fresh = built.is_file() and built.stat().st_mtime >= source.stat().st_mtime
    if not (fresh and all(j.is_file() for j in jars)):
        mvn = shutil.which("mvn")
        if not mvn:
            pytest.skip("skipped: Java present but no Maven to build the oracle")
        errors = []
        for offline in (["-o"], []):  # offline first; online fills ~/.m2 once
            r = subprocess.run([mvn, "-q", "-B"] + offline + ["package"], cwd=ORACLE_DIR,
                               capture_output=True, timeout=600)
            if r.returncode == 0:
                break
            errors.append(r.stdout.decode(errors="replace")[-800:])
        else:
            pytest.skip("skipped: the Java oracle could not be built (no Maven Central?): %s"
                        % errors[-1])
    return java, classes


def _convert_dataset_file(path):
    """One Extended JSON document per line -> concatenated BSON."""
    import bson
    from bson import json_util
    from bson.binary import UuidRepresentation
    from bson.codec_options import CodecOptions

    opts = json_util.JSONOptions(uuid_representation=UuidRepresentation.STANDARD)
    codec = CodecOptions(uuid_representation=UuidRepresentation.STANDARD)
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                # PyMongo moves a top-level _id to the front; a nested
                # document keeps its order, so wrap and cut it back out.
                outer = bson.BSON.encode({"d": json_util.loads(line, json_options=opts)},
                                         codec_options=codec)
                n = int.from_bytes(outer[7:11], "little")
                out.append(bytes(outer[7:7 + n]))
    return out


def _generate(args):
    r = subprocess.run([sys.executable, str(GEN)] + args, capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return _split(r.stdout)


def _split(data):
    docs, off = [], 0
    while off < len(data):
        n = int.from_bytes(data[off:off + 4], "little")
        docs.append(data[off:off + n])
        off += n
    return docs


@pytest.fixture(scope="module")
def inputs():
    """set name -> (list of BSON documents, list of source labels)."""
    sets = {}
    files = sorted((SHARED_DIR / "datasets").glob("*/*.json"))
    if not files:
        pytest.fail("no datasets under %s" % SHARED_DIR)
    docs, labels = [], []
    for f in files:
        d = _convert_dataset_file(f)
        docs += d
        labels += ["%s/%s:%d" % (f.parent.name, f.name, i + 1) for i in range(len(d))]
    sets["datasets"] = (docs, labels)
    for name, args in [("generated", ["--count", str(GENERATED_COUNT), "--seed",
                                      str(GENERATED_SEED)]),
                       ("bmp", ["--set", "bmp"]),
                       ("invalid_utf8", ["--set", "invalid", "--count", "2000"])]:
        d = _generate(args)
        sets[name] = (d, ["%s#%d" % (name, i) for i in range(len(d))])
    assert len(sets["generated"][0]) >= 10000
    return sets


def _run(cmd, data):
    r = subprocess.run(cmd, input=data, capture_output=True, timeout=300)
    assert r.returncode == 0, "%s failed: %s" % (cmd[0], r.stderr.decode(errors="replace")[-2000:])
    out = r.stdout
    assert out.endswith(b"\n") or not out
    return out.split(b"\n")[:-1]


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("docset", SETS)
def test_writer_matches_java_driver(oracle, inputs, docset, driver):
    java, classes = oracle
    docs, labels = inputs[docset]
    data = b"".join(docs)
    jar = ORACLE_DIR / "target" / "lib" / ("bson-%s.jar" % driver)
    # One JVM prints the four variants of each document on consecutive lines.
    lines = _run([java, "-cp", "%s%s%s" % (classes, os.pathsep, jar),
                  "org.mongocdc.oracle.Oracle", "all"], data)
    nvar = len(VARIANTS)
    assert len(lines) == nvar * len(docs), "oracle printed %d lines for %d documents" % (
        len(lines), len(docs))
    failures = []
    for k, (variant, args) in enumerate(VARIANTS.items()):
        expected = lines[k::nvar]
        actual = _run(_encoder_cmd() + args, data)
        assert len(actual) == len(docs), "mongocdc printed %d lines for %d documents" % (
            len(actual), len(docs))
        diffs = [i for i in range(len(docs)) if expected[i] != actual[i]]
        print("ejson-oracle %s %s driver %s: %d documents compared, %d differences"
              % (docset, variant, driver, len(docs), len(diffs)))
        for i in diffs[:5]:
            e, a = expected[i], actual[i]
            p = next((j for j in range(min(len(e), len(a))) if e[j] != a[j]), min(len(e), len(a)))
            failures.append("%s %s: java %r\n%s  ours %r" % (
                variant, labels[i], e[max(0, p - 40):p + 40], " " * (len(variant) + len(labels[i]) + 1),
                a[max(0, p - 40):p + 40]))
        if diffs:
            failures.append("%s: %d of %d documents differ" % (variant, len(diffs), len(docs)))
    if failures:
        pytest.fail("differences from the Java driver %s on %s:\n%s"
                    % (driver, docset, "\n".join(failures)))


def test_json_input_reads_the_same_documents(inputs):
    """`mongocdc encode --input json` (libbson's extended-JSON reader, one
    document per line) sees the same documents as the BSON path: over the
    shared datasets, both print identical lines."""
    docs, _ = inputs["datasets"]
    files = sorted((SHARED_DIR / "datasets").glob("*/*.json"))
    text = b"\n".join(f.read_bytes() for f in files)  # blank lines are skipped
    from_json = _run(_encoder_cmd() + ["--input", "json"], text)
    from_bson = _run(_encoder_cmd(), b"".join(docs))
    assert len(from_json) == len(docs)
    diffs = [i for i in range(len(docs)) if from_json[i] != from_bson[i]]
    assert not diffs, "first difference at document %d" % diffs[0]
