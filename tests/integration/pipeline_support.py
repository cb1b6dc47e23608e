"""Helpers for the capture pipeline's integration tests: the simulator as a
process, mongocdc configs, reading JSON-lines sink files and Kafka topics
byte-exactly, Debezium keys, the replay checker of the crash test, and the
waits on mongocdc's log (wait_until, wait_log, wait_streaming) that every
test file shares. The pytest fixtures built on them are in conftest.py.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from bson import json_util, ObjectId
from bson.int64 import Int64

SOURCE_DIR = Path(os.environ.get("MCDC_SOURCE_DIR") or Path(__file__).resolve().parents[2])
MONGOSIM = SOURCE_DIR / "tests" / "mongosim" / "mongosim.py"
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def dataset_loads(shared_dir, only=None):
    """--load arguments for every dataset file (or those whose db.coll is in only)."""
    out = []
    for f in sorted(Path(shared_dir, "datasets").glob("*/*.json")):
        ns = "%s.%s" % (f.parent.name, f.stem)
        if only is None or ns in only:
            out.append((str(f), ns))
    return out


def dataset_docs(path):
    """The documents of a dataset file, parsed as MongoDB Extended JSON."""
    docs = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if line:
                docs.append(json_util.loads(line))
    return docs


class Sim:
    """The MongoDB simulator run as a process (tests/mongosim/mongosim.py):
    its first JSON line gives the connection string and the control URL."""

    def __init__(self, workdir, loads=(), members=3, extra=(), timeout_s=120):
        if not MONGOSIM.is_file():
            import pytest
            pytest.skip("MongoDB simulator not in this tree")
        argv = [PY, str(MONGOSIM), "--topology", "replset", "--members", str(members),
                "--base-port", "0"]
        for path, ns in loads:
            argv += ["--load", "%s:%s" % (path, ns)]
        argv += list(extra)
        self.out_path = Path(workdir) / "sim.out"
        self.err_path = Path(workdir) / "sim.err"
        self._out = open(self.out_path, "wb")
        self._err = open(self.err_path, "wb")
        self.proc = subprocess.Popen(argv, stdout=self._out, stderr=self._err,
                                     stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        self.info = None
        while self.info is None:
            if self.proc.poll() is not None:
                raise RuntimeError("simulator exited: %s" % self.err_path.read_text()[-2000:])
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError("simulator not ready in %ss" % timeout_s)
            for line in self.out_path.read_text(errors="replace").splitlines():
                line = line.strip()
                if line.startswith("{"):
                    try:
                        d = json.loads(line)
                    except ValueError:
                        continue
                    if d.get("ready"):
                        self.info = d
            time.sleep(0.1)
        self.uri = self.info["uri"]
        self.control_url = self.info.get("control")

    def client(self, **kw):
        from pymongo import MongoClient
        kw.setdefault("serverSelectionTimeoutMS", 20000)
        return MongoClient(self.uri, **kw)

    def control(self, op, **args):
        """POSTs {"op": op, ...args} to the control API; returns its JSON reply."""
        body = json.dumps(dict(op=op, **args), default=json_util.default).encode()
        req = urllib.request.Request(self.control_url.rstrip("/") + "/" + op, data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            data = r.read()
        return json.loads(data) if data else None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._out.close()
        self._err.close()


def write_config(workdir, uri, name="cfg.yaml", sink_path=None, kafka=None, **opts):
    """Writes a mongocdc YAML config; opts use Debezium's names with '_' for '.'
    when given as keywords, or pass a dict via opts['raw']."""
    workdir = Path(workdir)
    raw = opts.pop("raw", {})
    conf = {
        "topic.prefix": "it",
        "mongodb.connection.string": uri,
        "cursor.max.await.time.ms": 300,
        "offsets.storage": "file",
        "offsets.file.path": str(workdir / "offsets.json"),
        "offsets.flush.interval.ms": 200,
        "offsets.flush.timeout.ms": 5000,
        "connect.backoff.initial.delay.ms": 200,
        "connect.backoff.max.delay.ms": 2000,
        "log.level": "info",
    }
    if kafka is not None:
        conf["sink.type"] = "kafka"
    else:
        conf["sink.type"] = "file"
        conf["sink.path"] = str(sink_path or workdir / "events.jsonl")
    for k, v in opts.items():
        conf[k.replace("__", ".")] = v
    conf.update(raw)
    lines = []
    for k, v in conf.items():
        lines.append("%s: %s" % (k, json.dumps(v)))
    if kafka is not None:
        lines.append("kafka:")
        for k, v in kafka.items():
            lines.append("  %s: %s" % (k, json.dumps(str(v))))
    p = workdir / name
    p.write_text("\n".join(lines) + "\n")
    return p


_DEC = json.JSONDecoder()


class Rec:
    """One record: topic, key bytes (verbatim), value bytes (None = tombstone)
    and the parsed value."""
    __slots__ = ("topic", "key", "value_raw", "value", "headers")

    def __init__(self, topic, key, value_raw, headers=None):
        self.topic = topic
        self.key = key
        self.value_raw = value_raw
        self.headers = headers or []  # [(name, value text)] in record order
        self.value = json.loads(value_raw) if value_raw is not None else None

    @property
    def payload(self):
        v = self.value
        if v is None:
            return None
        return v.get("payload", v) if "payload" in v and "schema" in v else v

    @property
    def op(self):
        p = self.payload
        return "tombstone" if p is None else p.get("op")

    @property
    def snapshot(self):
        p = self.payload
        return None if p is None else (p.get("source") or {}).get("snapshot")

    def after(self):
        p = self.payload
        if p is None or p.get("after") is None:
            return None
        return json_util.loads(p["after"])

    def updated_fields(self):
        """The fields an update set: updateDescription.updatedFields, or the
        $set of a 1.9 oplog event's patch."""
        p = self.payload
        ud = (p or {}).get("updateDescription") or {}
        uf = ud.get("updatedFields")
        if uf:
            return json.loads(uf)
        patch = (p or {}).get("patch")
        return json.loads(patch).get("$set") if patch else None


def _raw_member(line, name):
    """The verbatim JSON text of member `name` of the one-line object `line`."""
    m = re.search(r'"%s"\s*:\s*' % re.escape(name), line)
    if m is None:
        raise ValueError("no %s in %r" % (name, line[:200]))
    _, end = _DEC.raw_decode(line, m.end())
    return line[m.end():end]


def read_jsonl(path):
    """Records of a JSON-lines sink file, keys and values as written."""
    out = []
    p = Path(path)
    if not p.exists():
        return out
    with open(p, encoding="utf-8") as fh:
        for line in fh:
            line = line.rstrip("\n")
            if not line.strip():
                continue
            if not line.endswith("}"):
                break  # a line being written (or cut by SIGKILL)
            topic = json.loads(_raw_member(line, "topic"))
            key = _raw_member(line, "key")
            value = _raw_member(line, "value")
            headers = []
            at = line.rfind(', "headers": {')
            if at > 0:  # last member; a quote inside key/value texts is always escaped
                headers = json.loads(line[at + 13:-1], object_pairs_hook=list)
            out.append(Rec(topic, key, None if value == "null" else value, headers))
    return out


def read_topics(bootstrap, topics, idle_s=3.0, timeout_s=60, isolation="read_committed"):
    """Every record of topics (from the beginning), as Rec, in partition order;
    isolation: the consumer's isolation.level (read_uncommitted also returns
    the records of aborted and open transactions)."""
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "it-%d" % time.time_ns(),
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "isolation.level": isolation})
    c.subscribe(list(topics))
    out = []
    start = last = time.monotonic()
    deadline = last + timeout_s
    assigned = False
    # The idle window counts from the group's assignment: joining a group can
    # take seconds on a busy broker (the first join creates __consumer_offsets),
    # and an idle window counted from the subscribe then read nothing. A topic
    # that never gets an assignment (it does not exist) is given up after 15 s.
    while time.monotonic() < deadline:
        m = c.poll(0.5)
        now = time.monotonic()
        if not assigned and (c.assignment() or now - start >= 15.0):
            assigned = True
            last = now
        if m is None or m.error():
            if assigned and now - last >= idle_s:
                break
            continue
        last = now
        out.append(Rec(m.topic(), (m.key() or b"").decode("utf-8"),
                       None if m.value() is None else m.value().decode("utf-8"),
                       [(k, v.decode("utf-8")) for k, v in (m.headers() or [])]))
    c.close()
    return out


def java_string(s):
    """A JSON string literal as the MongoDB Java driver writes it (for keys)."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\b":
            out.append("\\b")
        elif ch == "\f":
            out.append("\\f")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif o < 0x20:
            out.append("\\u%04x" % o)
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def expected_key(_id):
    """Debezium's key JSON for an _id of the common types (debezium-format.md
    §1.1), or None for types this helper does not render."""
    if isinstance(_id, ObjectId):
        inner = '{"$oid": "%s"}' % str(_id)
    elif isinstance(_id, bool):
        return None
    elif isinstance(_id, (int, Int64)):
        inner = str(int(_id))
    elif isinstance(_id, str):
        inner = java_string(_id)
    else:
        return None
    return '{"id":%s}' % json.dumps(inner, ensure_ascii=False, separators=(",", ":"))


def key_id_text(rec):
    """The payload.id string of a record's key."""
    k = json.loads(rec.key)
    k = k.get("payload", k)
    return k["id"]


def data_records(recs, prefix):
    """Records on data topics (<prefix>.<db>.<coll>)."""
    return [r for r in recs if r.topic.startswith(prefix + ".") and r.topic.count(".") >= 2]


def log_text(workdir):
    p = Path(workdir) / "mongocdc.stderr"
    return p.read_text(errors="replace") if p.exists() else ""


def offsets_value(workdir):
    p = Path(workdir) / "offsets.json"
    if not p.exists():
        return None
    return p.read_text()


# ---------------------------------------------------------------- shared test setup and waits

STREAM_OPS = ("c", "u", "d")  # the ops of change events (snapshot reads are "r")


def wait_until(predicate, timeout_s: float, what: str, interval_s: float = 0.1):
    """Polls predicate() until it returns a true value (returned) or
    timeout_s seconds pass (TimeoutError naming `what`)."""
    deadline = time.monotonic() + timeout_s
    while True:
        v = predicate()
        if v:
            return v
        if time.monotonic() > deadline:
            raise TimeoutError("timed out after %.0fs waiting for %s" % (timeout_s, what))
        time.sleep(interval_s)


def wait_log(workdir, text, timeout_s=60, daemon=None, n=1):
    """Waits until mongocdc's log in workdir (mongocdc.stderr) holds text at
    least n times. With daemon (a conftest Daemon), its exit first is an
    AssertionError carrying the log's tail; timeout_s passing is a TimeoutError."""
    def check():
        if daemon is not None and not daemon.running():
            raise AssertionError("mongocdc exited: %s" % log_text(workdir)[-3000:])
        return log_text(workdir).count(text) >= n
    what = "log line %r" % text if n == 1 else "%d log lines %r" % (n, text)
    wait_until(check, timeout_s, what)


def wait_streaming(workdir, daemon=None, timeout_s=60):
    """wait_log for the first "streaming changes from" line: the daemon's
    initial snapshot (if any) is over and its change stream is open."""
    wait_log(workdir, "streaming changes from", timeout_s, daemon)


def sink_records(path, ops=None, prefix="it"):
    """The data-topic records (<prefix>.<db>.<coll>) of a JSON-lines sink file
    (or of a work folder's events.jsonl, write_config's default sink), in file
    order; with ops, only those whose op is one of them (tombstones have none)."""
    if Path(path).is_dir():
        path = Path(path) / "events.jsonl"
    recs = data_records(read_jsonl(path), prefix)
    return recs if ops is None else [r for r in recs if r.op in ops]


def stream_records(path, prefix="it"):
    """sink_records of the change events only (ops c, u, d)."""
    return sink_records(path, STREAM_OPS, prefix)


def fast_retry(**more):
    """Config options making mongocdc's reconnect backoff short (100 to 400 ms),
    with the options in more added."""
    opts = {"connect.backoff.initial.delay.ms": 100, "connect.backoff.max.delay.ms": 400}
    opts.update(more)
    return opts
