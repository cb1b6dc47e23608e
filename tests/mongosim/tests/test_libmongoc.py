"""The simulator seen through libmongoc 1.23 with a mongoc_client_pool_t (the daemon's mode)."""

import json
import subprocess
import time

from bson import json_util
from pymongo.errors import AutoReconnect

from conftest import MongoSim, run_probe, wait_for


def _events(lines):
    return [json_util.loads(l[6:]) for l in lines if l.startswith("EVENT ")]


def _token(lines):
    toks = [l[6:] for l in lines if l.startswith("TOKEN ")]
    return toks[-1] if toks else None


def _primary_addr(c):
    """The primary named by the member the client selects, or None while the client still
    holds a pooled connection the dropped member closed (AutoReconnect: the driver marks
    the server Unknown and selects again on the next call)."""
    try:
        return c.admin.command("hello").get("primary")
    except AutoReconnect:
        return None


def _open_streams(sim):
    return sum(sim.control("counters")["open_change_streams"].values())


def test_pool_crud_handshake_and_monitoring(sim, probe):
    """mongo-sim-spec §1.3, §1.6.2, §2.4: OP_QUERY handshake, OP_MSG commands, the pooled
    monitor's awaitable hello (exhaustAllowed) held for maxAwaitTimeMS, not a hot loop."""
    rc, out, err = run_probe(probe, "crud", sim.uri)
    assert rc == 0, (out, err)
    assert "DUP 11000" in out and "COUNT 1" in out
    assert any(l.startswith("DOC ") and '"$numberLong" : "7"' in l for l in out)
    before = sim.control("counters")["commands"]
    # an idle pooled client for 2 s: monitors wait on awaitable hello instead of spinning
    rc, out, err = run_probe(probe, "wait", sim.uri, 2000)
    assert rc == 0, (out, err)
    after = sim.control("counters")["commands"]
    hellos = sum(after.get(k, 0) - before.get(k, 0) for k in ("hello", "isMaster"))
    assert hellos < 40


def test_client_watch_and_resume_by_token(sim, probe):
    """mongo-sim-spec §3.1 (mongoc_client_watch = cluster stream on admin), §3.11 (tokens
    round-trip through libmongoc), §3.3 (resumeAfter skips what was seen)."""
    c = sim.client()
    p = subprocess.Popen([probe, "watch", sim.uri, "3", "10000"], stdout=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: _open_streams(sim) >= 1)
        c.a.x.insert_one({"_id": 1})
        c.b.y.insert_one({"_id": 2, "n": 1})
        c.b.y.update_one({"_id": 2}, {"$set": {"n": 2}})
        out, _ = p.communicate(timeout=20)
    finally:
        p.kill()
    lines = out.splitlines()
    assert p.returncode == 0, lines
    evs = _events(lines)
    assert [(e["operationType"], e["ns"]["db"]) for e in evs] == [("insert", "a"), ("insert", "b"), ("update", "b")]
    assert evs[2]["updateDescription"]["updatedFields"] == {"n": 2}
    first_tok = json.dumps({"_data": evs[0]["_id"]["_data"]})
    rc, out2, err = run_probe(probe, "watch", sim.uri, 2, 10000, first_tok)
    assert rc == 0, (out2, err)
    assert [e["documentKey"]["_id"] for e in _events(out2)] == [2, 2]


def test_resume_token_advances_while_idle(sim, probe):
    """mongo-sim-spec §3.4/§3.13: with no matching events mongoc caches the
    postBatchResumeToken of every (empty) batch, which moves with the periodic no-op."""
    rc, out, err = run_probe(probe, "wait", sim.uri, 300)
    t0 = json.loads(_token(out))["_data"]
    time.sleep(1.2)
    rc, out, err = run_probe(probe, "wait", sim.uri, 1500)
    assert rc == 0
    t1 = json.loads(_token(out))["_data"]
    assert t1 > t0


def test_watch_survives_stepdown_and_dropped_connections(sim, probe):
    """mongo-sim-spec §2.6 and §3.13 / jstests replsets/change_stream_stepdown.js: after a
    step-down and a network drop the stream continues on the new primary without losing or
    repeating events. mongoc resumes by itself; when its resume aggregate lands on a pooled
    socket the drop killed, the stream is dead (§3.13) and the probe reopens it from the last
    token, as the capture pipeline must."""
    c = sim.client(retryWrites=True)
    p = subprocess.Popen([probe, "watch", sim.uri, "4", "20000"], stdout=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: _open_streams(sim) >= 1)
        c.s.t.insert_many([{"_id": 1}, {"_id": 2}])
        time.sleep(0.5)
        r = sim.control("stepdown")
        assert r["elected"] == 1
        sim.control("drop_connections")
        wait_for(lambda: _primary_addr(c) == sim.members[1], timeout=15)
        c.s.t.insert_many([{"_id": 3}, {"_id": 4}])
        out, _ = p.communicate(timeout=30)
    finally:
        p.kill()
    lines = out.splitlines()
    assert p.returncode == 0, lines
    assert [e["documentKey"]["_id"] for e in _events(lines)] == [1, 2, 3, 4]
    per = sim.control("counters")["per_member"]
    assert per["1"].get("aggregate", 0) >= 1  # the resumed stream ran on the new primary


def test_tailable_oplog_cursor(sim, probe):
    """mongo-sim-spec §5.6: find on local.oplog.rs with {ts: {$gt}} tailable+awaitData through
    libmongoc; entries arrive as they are written."""
    c = sim.client()
    last = c.local.oplog.rs.find().sort("$natural", -1).limit(1).next()["ts"]
    sim.control("noop_interval", seconds=0)
    p = subprocess.Popen([probe, "oplog", sim.uri, str(last.time), str(last.inc), "3", "10000"], stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        c.o.p.insert_one({"_id": 1})
        c.o.p.delete_one({"_id": 1})
        out, _ = p.communicate(timeout=20)
    finally:
        p.kill()
    ents = [json_util.loads(l[6:]) for l in out.splitlines() if l.startswith("ENTRY ")]
    assert p.returncode == 0, out
    assert [e["op"] for e in ents] == ["c", "i", "d"]
    assert ents[0]["o"]["create"] == "p" and ents[1]["o"] == {"_id": 1}


def test_single_threaded_client(sim, probe):
    """mongo-sim-spec §1.6.1: a single-threaded mongoc_client_t (OP_QUERY handshake and
    heartbeats on one socket per server) runs CRUD against the primary."""
    rc, out, err = run_probe(probe, "crud-single", sim.uri)
    assert rc == 0, (out, err)
    assert "DUP 11000" in out and "COUNT 1" in out


def test_history_lost_and_capped_position_through_libmongoc(sim, probe):
    """mongo-sim-spec §3.12/§4.2 as libmongoc reports them: resuming from a token older than
    the oplog fails with 286 and the NonResumableChangeStreamError label; a tailing oplog
    cursor whose position is truncated away fails with 136 CappedPositionLost."""
    c = sim.client()
    with c.hl.c.watch(max_await_time_ms=100) as s:
        c.hl.c.insert_one({"_id": 1})
        tok = s.next()["_id"]
    first = c.local.oplog.rs.find_one({"ns": "hl.c", "op": "i"})["ts"]
    sim.control("noop_interval", seconds=0)
    p = subprocess.Popen([probe, "oplog", sim.uri, str(first.time), str(first.inc - 1), "50", "8000"],
                         stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)  # the probe has read the entries written so far and is waiting
        # hold its next getMore while entries it has not read are written and truncated away
        sim.control("delay", command="getMore", ms=2000, times=1)
        time.sleep(0.6)
        for i in range(3):
            c.hl.c.insert_one({"_id": 10 + i})
        sim.control("truncate_oplog", keep=1)
        c.hl.c.insert_one({"_id": 20})
        out, _ = p.communicate(timeout=20)
    finally:
        p.kill()
    assert p.returncode == 3, out
    assert any(l.startswith("ERROR 17 136 ") for l in out.splitlines()), out
    rc, lines, err = run_probe(probe, "watch", sim.uri, 1, 3000, json.dumps({"_data": tok["_data"]}))
    assert rc == 3, lines
    assert any(l.startswith("ERROR 17 286 ") for l in lines), lines
    reply = [l for l in lines if l.startswith("REPLY ")][0]
    assert "NonResumableChangeStreamError" in reply
