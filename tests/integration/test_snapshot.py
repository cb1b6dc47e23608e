"""Initial snapshot options and modes on the simulator (debezium-format.md
§5.1-5.2): snapshot.include.collection.list, snapshot.collection.filter.
overrides, snapshot.max.threads / fetch.size, initial_only, always, no_data,
a failing snapshot reader, heartbeats, and the refusal of a standalone server.
"""

import datetime
import json
import re
import socket
import struct
import threading
import time

import bson

import pytest

from conftest import wait_until
from pipeline_support import (Sim, data_records, dataset_docs, dataset_loads, expected_key,
                              key_id_text, log_text, offsets_value, read_jsonl, wait_streaming,
                              write_config)

PREFIX = "it"


def recs_of(path):
    return data_records(read_jsonl(path), PREFIX)


@pytest.fixture
def three_sim(tmp_workdir, shared_dir):
    sim = Sim(tmp_workdir, dataset_loads(shared_dir, only={"sample_mflix.users", "classic.products",
                                                           "sample_mflix.theaters"}))
    yield sim
    sim.stop()


def test_include_list_filter_override_and_threads(tmp_workdir, shared_dir, three_sim,
                                                  start_mongocdc):
    sim = three_sim
    cfg = write_config(tmp_workdir, sim.uri, raw={
        "snapshot.include.collection.list": "sample_mflix\\.users,classic\\.products",
        "snapshot.collection.filter.overrides": "classic.products",
        "snapshot.collection.filter.overrides.classic.products": '{"type": "phone"}',
        "snapshot.max.threads": 3,
        "snapshot.fetch.size": 7,
    })
    d = start_mongocdc("-c", cfg)
    wait_until(lambda: "snapshot complete" in log_text(tmp_workdir), 60, "snapshot")
    reads = [r for r in recs_of(tmp_workdir / "events.jsonl") if r.op == "r"]
    topics = {r.topic for r in reads}
    assert topics == {PREFIX + ".sample_mflix.users", PREFIX + ".classic.products"}
    users = dataset_docs(shared_dir / "datasets/sample_mflix/users.json")
    products = dataset_docs(shared_dir / "datasets/classic/products.json")
    phones = [p for p in products if p.get("type") == "phone"]
    assert sorted(r.key for r in reads if r.topic.endswith(".products")) == \
        sorted(expected_key(p["_id"]) for p in phones)
    assert len([r for r in reads if r.topic.endswith(".users")]) == len(users)
    assert [r.snapshot for r in reads].count("last") == 1
    # collections outside the snapshot list are still streamed
    c = sim.client()
    c.sample_mflix.theaters.insert_one({"_id": "new-theater", "theaterId": 9999})
    wait_until(lambda: any(r.op == "c" for r in recs_of(tmp_workdir / "events.jsonl")), 30,
               "the insert")
    assert d.stop(timeout_s=30) == 0


def test_initial_only_copies_then_exits(tmp_workdir, three_sim, run_mongocdc):
    cfg = write_config(tmp_workdir, three_sim.uri, **{"snapshot.mode": "initial_only"})
    r = run_mongocdc("-c", cfg, timeout_s=60)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    first = recs_of(tmp_workdir / "events.jsonl")
    assert first and all(x.op == "r" for x in first)
    off = offsets_value(tmp_workdir)
    assert off and "initsync" not in off
    r = run_mongocdc("-c", cfg, timeout_s=60)
    assert r.returncode == 0
    assert b"nothing to do" in r.stderr
    assert len(recs_of(tmp_workdir / "events.jsonl")) == len(first)


def test_always_resnapshots_and_streams_what_happened_meanwhile(tmp_workdir, three_sim,
                                                                start_mongocdc):
    sim = three_sim
    cfg1 = write_config(tmp_workdir, sim.uri, name="run1.yaml", sink_path=tmp_workdir / "run1.jsonl",
                        **{"snapshot.mode": "always"})
    d = start_mongocdc("-c", cfg1)
    wait_streaming(tmp_workdir)
    assert d.stop(timeout_s=30) == 0
    c = sim.client()
    c.itdb.meanwhile.insert_one({"_id": "m1"})
    c.itdb.meanwhile.delete_one({"_id": "m1"})
    cfg2 = write_config(tmp_workdir, sim.uri, name="run2.yaml", sink_path=tmp_workdir / "run2.jsonl",
                        **{"snapshot.mode": "always"})
    d = start_mongocdc("-c", cfg2)
    wait_until(lambda: [r.op for r in recs_of(tmp_workdir / "run2.jsonl")
                        if r.topic == PREFIX + ".itdb.meanwhile"] == ["c", "d", "tombstone"], 60,
               "the changes made while stopped")
    run1 = [r for r in recs_of(tmp_workdir / "run1.jsonl") if r.op == "r"]
    run2 = [r for r in recs_of(tmp_workdir / "run2.jsonl") if r.op == "r"]
    assert len(run2) == len(run1) > 0
    assert d.stop(timeout_s=30) == 0


def test_no_data_streams_without_copying(tmp_workdir, three_sim, start_mongocdc):
    cfg = write_config(tmp_workdir, three_sim.uri, **{"snapshot.mode": "no_data"})
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir)
    three_sim.client().itdb.nodata.insert_one({"_id": 1})
    wait_until(lambda: recs_of(tmp_workdir / "events.jsonl"), 30, "the insert")
    recs = recs_of(tmp_workdir / "events.jsonl")
    assert [r.op for r in recs] == ["c"]
    assert d.stop(timeout_s=30) == 0


def test_failing_snapshot_reader_fails_the_snapshot(tmp_workdir, three_sim, run_mongocdc):
    three_sim.control("fail", commands=["find"], code=13, errmsg="not authorized on sample_mflix",
                      times=1000)
    cfg = write_config(tmp_workdir, three_sim.uri, **{"snapshot.max.threads": 2})
    r = run_mongocdc("-c", cfg, timeout_s=60)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1, err[-2000:]
    assert "snapshot of " in err and "not authorized" in err
    off = offsets_value(tmp_workdir)
    # the stored value still says "snapshot running": the next start redoes it
    assert off is None or "initsync" in off
    assert not [x for x in recs_of(tmp_workdir / "events.jsonl") if x.snapshot == "last"]
    three_sim.control("clear_faults")


def test_heartbeats(tmp_workdir, three_sim, start_mongocdc):
    cfg = write_config(tmp_workdir, three_sim.uri, **{"snapshot.mode": "no_data",
                                                      "heartbeat.interval.ms": 300})
    d = start_mongocdc("-c", cfg)
    wait_until(lambda: len([r for r in read_jsonl(tmp_workdir / "events.jsonl")
                            if r.topic.startswith("__debezium-heartbeat")]) >= 3, 30, "heartbeats")
    hb = [r for r in read_jsonl(tmp_workdir / "events.jsonl")
          if r.topic.startswith("__debezium-heartbeat")][0]
    assert hb.topic == "__debezium-heartbeat." + PREFIX
    assert json.loads(hb.key) == {"serverName": PREFIX}
    assert d.stop(timeout_s=30) == 0


class StandaloneServer(object):
    """A MongoDB standalone as far as the driver's handshake and a `hello` go:
    a few lines of wire protocol (OP_QUERY answered with OP_REPLY, OP_MSG with
    OP_MSG; MongoDB's "Wire Protocol" page). `hello`/`isMaster` get a
    standalone's reply (no setName, no msg: isdbgrid); any other command gets
    CommandNotFound. Serves until stop()."""

    HELLO = ("hello", "isMaster", "ismaster")

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.hellos = 0
        self.conns = []
        threading.Thread(target=self._accept, daemon=True).start()

    def stop(self):
        self.sock.close()
        for c in self.conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _reply_to(self, cmd):
        name = next(iter(cmd), "")
        if name in self.HELLO:
            self.hellos += 1
            return {"ismaster": True, "isWritablePrimary": True, "helloOk": True,
                    "maxBsonObjectSize": 16777216, "maxMessageSizeBytes": 48000000,
                    "maxWriteBatchSize": 100000,
                    "localTime": datetime.datetime.now(datetime.timezone.utc),
                    "logicalSessionTimeoutMinutes": 30, "connectionId": 1,
                    "minWireVersion": 0, "maxWireVersion": 17, "readOnly": False, "ok": 1.0}
        return {"ok": 0.0, "errmsg": "no such command: '%s'" % name, "code": 59,
                "codeName": "CommandNotFound"}

    @staticmethod
    def _recv(c, n):
        data = b""
        while len(data) < n:
            chunk = c.recv(n - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data

    def _serve(self, c):
        try:
            while True:
                length, req_id, _, op = struct.unpack("<iiii", self._recv(c, 16))
                body = self._recv(c, length - 16)
                if op == 2004:  # OP_QUERY: flags, collection name, skip, limit, query
                    end = body.index(b"\0", 4)
                    n = struct.unpack_from("<i", body, end + 9)[0]
                    cmd = bson.decode(body[end + 9:end + 9 + n])
                    doc = bson.encode(self._reply_to(cmd))
                    payload = struct.pack("<iqii", 0, 0, 0, 1) + doc
                    op_out = 1  # OP_REPLY
                elif op == 2013:  # OP_MSG: flags, then a kind-0 section holds the command
                    flags = struct.unpack_from("<I", body, 0)[0]
                    assert body[4] == 0, "the command's body section comes first"
                    cmd = bson.decode(body[5:5 + struct.unpack_from("<i", body, 5)[0]])
                    if flags & 2:  # moreToCome: no reply
                        continue
                    payload = struct.pack("<I", 0) + b"\0" + bson.encode(self._reply_to(cmd))
                    op_out = 2013
                else:
                    return
                c.sendall(struct.pack("<iiii", 16 + len(payload), 0, req_id, op_out) + payload)
        except (EOFError, OSError):
            pass
        finally:
            c.close()


def test_standalone_server_is_refused(tmp_workdir, run_mongocdc):
    s = StandaloneServer()
    try:
        cfg = write_config(tmp_workdir, "mongodb://127.0.0.1:%d/" % s.port)
        r = run_mongocdc("-c", cfg, timeout_s=60)
    finally:
        s.stop()
    err = r.stderr.decode(errors="replace")
    assert s.hellos > 0
    assert r.returncode != 0
    assert "standalone" in err and "oplog" in err and "replica set" in err, err[-1000:]


def test_progress_is_logged_every_10s(tmp_workdir, shared_dir, start_mongocdc):
    sim = Sim(tmp_workdir, dataset_loads(shared_dir, only={"sample_mflix.users"}))
    try:
        # a slow server: each batch of 20 documents takes 1.5 s
        sim.control("delay", command="getMore", ms=1500)
        cfg = write_config(tmp_workdir, sim.uri, **{"snapshot.fetch.size": 20})
        d = start_mongocdc("-c", cfg)
        wait_until(lambda: "snapshot progress" in log_text(tmp_workdir), 30, "a progress line")
        line = [l for l in log_text(tmp_workdir).splitlines() if "snapshot progress" in l][0]
        m = re.search(r"sample_mflix\.users: (\d+)/185 documents \((\d+\.\d)%\), (\d+) docs/s, "
                      r"ETA (\d+) s", line)
        assert m, line
        done = int(m.group(1))
        assert 0 < done < 185 and abs(float(m.group(2)) - 100.0 * done / 185) < 0.1
        sim.control("delay", command="getMore", ms=0)
        wait_until(lambda: "snapshot complete" in log_text(tmp_workdir), 60, "the summary")
        summary = [l for l in log_text(tmp_workdir).splitlines() if "snapshot complete" in l][0]
        assert re.search(r"1 collections, 185 documents in [\d.]+ s \(\d+ docs/s\)", summary)
        assert d.stop(timeout_s=30) == 0
    finally:
        sim.stop()


def test_snapshot_source_and_headers_per_dialect(tmp_workdir, three_sim, run_mongocdc):
    """1.9: every `r` record's source has ts_ms = seconds of the newest oplog
    entry read before the copy × 1000 and ord = its increment, and no headers.
    3.x: the four __debezium.context.* headers with one runId per task start;
    ts_us / ts_ns of the same µs clock read as ts_ms (debezium-format.md §1.5,
    §1.7)."""
    newest = next(three_sim.client().local["oplog.rs"].find().sort("$natural", -1).limit(1))["ts"]
    runs = {}
    for name, dialect in (("a19", "1.9"), ("b3x", "3.x"), ("c3x", "3.x")):
        cfg = write_config(tmp_workdir, three_sim.uri, name=name + ".yaml",
                           sink_path=tmp_workdir / (name + ".jsonl"),
                           raw={"snapshot.mode": "initial_only",
                                "debezium.compatibility": dialect,
                                "offsets.file.path": str(tmp_workdir / (name + ".offsets"))})
        r = run_mongocdc("-c", cfg, timeout_s=60)
        assert r.returncode == 0, r.stderr.decode()[-2000:]
        runs[name] = [x for x in recs_of(tmp_workdir / (name + ".jsonl")) if x.op == "r"]
        assert runs[name]
    for x in runs["a19"]:
        src = x.payload["source"]
        assert (src["ts_ms"], src["ord"]) == (newest.time * 1000, newest.inc), src
        assert x.headers == []
    run_ids = set()
    for name in ("b3x", "c3x"):
        ids = set()
        for x in runs[name]:
            names = [h[0] for h in x.headers]
            assert names == ["__debezium.context.connectorLogicalName",
                             "__debezium.context.taskId", "__debezium.context.connectorName",
                             "__debezium.context.runId"], x.headers
            assert [h[1] for h in x.headers[:3]] == [PREFIX, "0", "mongodb"]
            assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-"
                                r"[0-9a-f]{12}", x.headers[3][1])
            ids.add(x.headers[3][1])
            src = x.payload["source"]
            assert src["ts_us"] // 1000 == src["ts_ms"] and src["ts_ns"] == src["ts_us"] * 1000
        assert len(ids) == 1
        run_ids |= ids
    assert len(run_ids) == 2, "each task start draws a new runId"
    # µs precision: over a whole snapshot some ts_us is not a whole millisecond
    assert any(x.payload["source"]["ts_us"] % 1000 for x in runs["b3x"] + runs["c3x"])


def test_context_headers_reach_kafka(tmp_workdir, three_sim, kafka, start_mongocdc):
    """3.x on a real broker: the data record and its tombstone carry the four
    __debezium.context.* string headers (debezium-format.md §1.6, §1.7)."""
    from pipeline_support import read_topics
    prefix = "hdr%d" % time.time_ns()
    cfg = write_config(tmp_workdir, three_sim.uri, kafka={"bootstrap.servers": kafka.bootstrap},
                       **{"topic.prefix": prefix, "snapshot.mode": "no_data",
                          "debezium.compatibility": "3.x"})
    d = start_mongocdc("-c", cfg)
    wait_streaming(tmp_workdir)
    c = three_sim.client()
    c.itdb.hdr.insert_one({"_id": 1})
    c.itdb.hdr.delete_one({"_id": 1})
    topic = prefix + ".itdb.hdr"
    recs = []
    deadline = time.monotonic() + 60
    while len(recs) < 3 and time.monotonic() < deadline:
        recs = read_topics(kafka.bootstrap, [topic], idle_s=2, timeout_s=20)
    assert d.stop(timeout_s=30) == 0
    assert [r.op for r in recs] == ["c", "d", "tombstone"]
    run_ids = set()
    for r in recs:
        assert [h[0] for h in r.headers] == [
            "__debezium.context.connectorLogicalName", "__debezium.context.taskId",
            "__debezium.context.connectorName", "__debezium.context.runId"], r.headers
        assert [h[1] for h in r.headers[:3]] == [prefix, "0", "mongodb"]
        run_ids.add(r.headers[3][1])
    assert len(run_ids) == 1
