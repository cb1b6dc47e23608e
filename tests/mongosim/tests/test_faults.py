"""One test per fault hook of the control API (mongo-sim-spec §8.2), each checked through a
real client, plus the wire-level fault commands real servers have."""

import threading
import time

import pymongo
import pytest
from pymongo.errors import (AutoReconnect, NetworkTimeout, NotMasterError, OperationFailure)

from conftest import MongoSim, wait_for


def _primary_addr(c):
    """The primary named by the member the client currently selects as primary, or None
    while the client has not yet noticed that its old primary went away: a member made
    unreachable (or restarted) closes its connections, and a command already on one of
    them fails with AutoReconnect while the client's monitor marks the server Unknown
    (server discovery and monitoring spec, 'network error when reading or writing'). The
    next call selects again; callers poll this with wait_for."""
    try:
        return c.admin.command("hello").get("primary")
    except AutoReconnect:
        return None


def test_stepdown_pymongo_watch_resumes(sim):
    """jstests/replsets/change_stream_stepdown.js, mongo-sim-spec §2.6: the primary steps
    down, its stream cursor is killed, pymongo resumes on the new primary with no gap."""
    c = sim.client()
    coll = c.sd.c
    with coll.watch(max_await_time_ms=200) as s:
        coll.insert_one({"_id": 1})
        assert s.next()["documentKey"] == {"_id": 1}
        sim.control("stepdown", elect=2)
        sim.control("kill_cursors", kind="changeStream")
        wait_for(lambda: _primary_addr(c) == sim.members[2], timeout=15)
        coll.insert_one({"_id": 2})
        assert s.next()["documentKey"] == {"_id": 2}
    h = c.admin.command("hello")
    assert str(h["electionId"]).endswith("2")


def test_drop_connections_stream_resumes(sim):
    """mongo-sim-spec §4.5: a connection closed mid-stream is a network error; the change
    stream resumes (one new aggregate) and the client keeps working."""
    c = sim.client()
    w = sim.client()
    coll = c.dc.c
    with coll.watch(max_await_time_ms=3000) as s:
        w.dc.c.insert_one({"_id": 1})
        assert s.next()["documentKey"] == {"_id": 1}
        before = sim.control("counters")["commands"].get("aggregate", 0)
        gm = sim.control("counters")["commands"].get("getMore", 0)
        got = []
        th = threading.Thread(target=lambda: got.append(s.next()))
        th.start()
        wait_for(lambda: sim.control("counters")["commands"].get("getMore", 0) > gm)
        time.sleep(0.2)  # the getMore is now waiting on the server
        assert sim.control("drop_connections")["dropped"] >= 1
        w.dc.c.insert_one({"_id": 2})
        th.join(15)
        assert got and got[0]["documentKey"] == {"_id": 2}
    assert sim.control("counters")["commands"]["aggregate"] > before


def test_unreachable_member_and_back(sim):
    """mongo-sim-spec §8.2 'member down / up': the primary becomes unreachable, another member
    is elected and takes writes; when it comes back it is a secondary."""
    c = sim.client()
    c.u.c.insert_one({"_id": 1})
    r = sim.control("unreachable", member=0)
    assert r["elected"] == 1
    wait_for(lambda: _primary_addr(c) == sim.members[1], timeout=15)
    c.u.c.insert_one({"_id": 2})
    sim.control("reachable", member=0, restart=True)
    d = pymongo.MongoClient(sim.members[0], directConnection=True, serverSelectionTimeoutMS=5000)
    try:
        h = d.admin.command("hello")
        assert h["secondary"] is True and h["topologyVersion"]["counter"] == 0
    finally:
        d.close()
    assert c.u.c.count_documents({}) == 2


def test_delay_causes_socket_timeout(sim):
    """mongo-sim-spec §4.5 'reply later than socketTimeoutMS': a delayed reply reaches the
    client as a network timeout; without the delay the same command succeeds."""
    c = sim.client(socketTimeoutMS=300, retryReads=False)
    c.d.c.insert_one({"_id": 1})
    sim.control("delay", command="find", ms=800, times=1)
    with pytest.raises(NetworkTimeout):
        c.d.c.find_one({"_id": 1})
    time.sleep(0.6)
    assert c.d.c.find_one({"_id": 1}) == {"_id": 1}


def test_injected_resumable_error_on_getmore(sim):
    """mongo-sim-spec §4.2/§4.3: a getMore error with code 6 gets the
    ResumableChangeStreamError label and the driver resumes transparently."""
    c = sim.client()
    coll = c.f.c
    with coll.watch(max_await_time_ms=200) as s:
        before = sim.control("counters")["commands"].get("aggregate", 0)
        sim.control("fail", commands=["getMore"], code=6, times=1)
        coll.insert_one({"_id": 1})
        assert s.next()["documentKey"] == {"_id": 1}
    assert sim.control("counters")["commands"]["aggregate"] == before + 1


def test_injected_nonresumable_and_label_override(sim):
    """Change-streams spec unified tests (change-streams-resume-errorLabels.json): code 280
    without a resumable label is fatal; code 280 injected WITH ResumableChangeStreamError is
    resumed, because 4.4+ drivers decide by label."""
    c = sim.client()
    coll = c.f2.c
    with coll.watch(max_await_time_ms=200) as s:
        sim.control("fail", commands=["getMore"], code=280, errorLabels=["ResumableChangeStreamError"], times=1)
        coll.insert_one({"_id": 1})
        assert s.next()["documentKey"] == {"_id": 1}
        sim.control("fail", commands=["getMore"], code=280, times=1)
        with pytest.raises(OperationFailure) as ei:
            s.next()
        assert ei.value.code == 280
        assert "NonResumableChangeStreamError" in ei.value.details.get("errorLabels", [])


def test_configure_fail_point_fail_command(sim):
    """Server test command configureFailPoint 'failCommand' (as used by the drivers'
    specification tests): a retryable insert failing with 91 carries RetryableWriteError and
    is retried once by the driver; closeConnection is a network error."""
    # 91 marks the server Unknown; the streaming monitor is parked in an awaitable hello whose
    # topology did not change, so the retry waits for the next heartbeat: keep it short
    c = sim.client(retryWrites=True, heartbeatFrequencyMS=500)
    c.admin.command("configureFailPoint", "failCommand", mode={"times": 1},
                    data={"failCommands": ["insert"], "errorCode": 91})
    c.fp.c.insert_one({"_id": 1})
    assert c.fp.c.count_documents({}) == 1
    assert sim.control("counters")["commands"]["insert"] == 2
    c.admin.command("configureFailPoint", "failCommand", mode={"times": 1},
                    data={"failCommands": ["find"], "closeConnection": True})
    c2 = sim.client(retryReads=False)
    with pytest.raises(AutoReconnect):
        c2.fp.c.find_one({})
    c.admin.command("configureFailPoint", "failCommand", mode="off")
    assert c.fp.c.find_one({}) == {"_id": 1}


def test_retryable_write_not_applied_twice(sim):
    """mongo-sim-spec §1.8: the reply of an applied insert is lost (connection closed after
    apply); the driver retries with the same (lsid, txnNumber) and gets the stored reply
    instead of a duplicate-key error; the oplog has one insert."""
    c = sim.client(retryWrites=True)
    sim.control("fail", commands=["insert"], closeConnection=True, afterApply=True, times=1)
    c.rw.c.insert_one({"_id": 1})
    assert c.rw.c.count_documents({}) == 1
    assert c.local.oplog.rs.count_documents({"op": "i", "ns": "rw.c"}) == 1


def test_truncate_oplog_history_lost_and_capped_position(sim):
    """mongo-sim-spec §3.3/§3.12/§5.6: resuming before the oldest entry fails with 286
    (NonResumableChangeStreamError); an open oplog cursor whose position was truncated fails
    with 136 CappedPositionLost; an oplog find from before the oldest entry does not fail."""
    c = sim.client()
    coll = c.t.c
    with coll.watch(max_await_time_ms=100) as s:
        coll.insert_one({"_id": 1})
        tok = s.next()["_id"]
    for i in range(5):
        coll.insert_one({"_id": 10 + i})
    first = c.local.oplog.rs.find_one({"ns": "t.c", "op": "i", "o._id": 11})
    cur = c.local.oplog.rs.find({"ts": {"$gte": first["ts"]}}, cursor_type=pymongo.CursorType.TAILABLE_AWAIT,
                                batch_size=1).max_await_time_ms(100)
    assert next(cur)["o"]["_id"] == 11
    sim.control("truncate_oplog", keep=2)
    with pytest.raises(OperationFailure) as ei:
        coll.watch(resume_after=tok)
    assert ei.value.code == 286
    assert "NonResumableChangeStreamError" in ei.value.details["errorLabels"]
    # pymongo swallows 136 on tailable cursors (cursor.py: _CURSOR_CLOSED_ERRORS) and marks the
    # cursor dead, which is what a real server's CappedPositionLost produces
    with pytest.raises(StopIteration):
        next(cur)
    assert cur.alive is False
    old = list(c.local.oplog.rs.find({"ts": {"$gt": first["ts"]}}))
    assert len(old) == 2


def test_oplog_size_cap_truncates(tmp_path):
    """Manual `core/replica-set-oplog`: the oplog is a capped collection; with a tiny
    --oplog-size-mb old entries disappear and a stream resumed from them reports 286."""
    with MongoSim(members=1, oplog_size_mb=0.05, noop_interval=0) as s:
        c = s.client()
        with c.cap.c.watch(max_await_time_ms=100) as st:
            c.cap.c.insert_one({"_id": 0})
            tok = st.next()["_id"]
        c.cap.c.insert_many([{"_id": i + 1, "pad": "x" * 500} for i in range(200)])
        n = c.local.oplog.rs.estimated_document_count()
        assert 0 < n < 120
        with pytest.raises(OperationFailure) as ei:
            c.cap.c.watch(resume_after=tok)
        assert ei.value.code == 286


def test_write_action_and_counters(sim):
    """Control API 'write' and 'counters': writes run on the primary produce the same oplog
    entries and change events as client writes; counters report commands and cursors."""
    c = sim.client()
    with c.w.watch(max_await_time_ms=200) as s:
        sim.control("write", op="insert", ns="w.c", docs=[{"_id": 1, "a": [1, 2, 3]}])
        sim.control("write", op="update", ns="w.c", q={"_id": 1}, u={"$pull": {"a": 2}})
        sim.control("write", op="txn", ops=[{"op": "insert", "ns": "w.c", "doc": {"_id": 2}},
                                            {"op": "delete", "ns": "w.c", "q": {"_id": 1}}])
        evs = [s.next() for _ in range(4)]
        cnt = sim.control("counters")
        assert cnt["open_change_streams"]["0"] == 1
    assert [e["operationType"] for e in evs] == ["insert", "update", "insert", "delete"]
    # a $pull is logged as the whole array (truncations come from pipeline updates only)
    assert evs[1]["updateDescription"]["updatedFields"] == {"a": [1, 3]}
    assert evs[1]["updateDescription"]["truncatedArrays"] == []
    assert "lsid" in evs[2] and evs[2]["clusterTime"] == evs[3]["clusterTime"]
    assert cnt["commands"]["aggregate"] >= 1 and cnt["commands"]["getMore"] >= 1


def test_kill_cursors_driver_resumes(sim):
    """mongo-sim-spec §4.2 (43 CursorNotFound is always resumable): a killed stream cursor is
    re-opened by the driver."""
    c = sim.client()
    with c.k.c.watch(max_await_time_ms=200) as s:
        assert sim.control("kill_cursors", kind="changeStream")["killed"] == 1
        c.k.c.insert_one({"_id": 1})
        assert s.next()["documentKey"] == {"_id": 1}


def test_repl_commands_stepdown_and_resize(sim):
    """Manual `replSetStepDown`, `replSetResizeOplog`: the wire commands work like the control
    hooks (the old primary refuses writes afterwards with 10107)."""
    c = sim.client()
    try:
        c.admin.command("replSetStepDown", 10)
    except AutoReconnect:
        pass
    wait_for(lambda: _primary_addr(c) == sim.members[1], timeout=15)
    c.rs.c.insert_one({"_id": 1})
    d = pymongo.MongoClient(sim.members[0], directConnection=True, serverSelectionTimeoutMS=5000)
    try:
        with pytest.raises(NotMasterError):
            d.rs.c.insert_one({"_id": 2})
    finally:
        d.close()
    assert c.admin.command("replSetResizeOplog", 1, size=1000.0)["ok"] == 1.0
    with pytest.raises(OperationFailure):
        c.admin.command("replSetResizeOplog", 1, size=10.0)


def test_pre_images_via_collmod(sim):
    """Manual `changeStreams` 'Change Streams with Document Pre- and Post-Images' (6.0):
    collMod changeStreamPreAndPostImages enables fullDocumentBeforeChange and
    fullDocument whenAvailable/required."""
    c = sim.client()
    # pymongo 3.11 predates fullDocumentBeforeChange: send the aggregate/getMore directly
    def stream(coll, spec):
        r = c.img.command("aggregate", coll, pipeline=[{"$changeStream": spec}], cursor={})
        return r["cursor"]["id"]

    def more(coll, cid):
        return c.img.command("getMore", cid, collection=coll, maxTimeMS=500)["cursor"]["nextBatch"]

    c.img.create_collection("c")
    c.img.c.insert_one({"_id": 1, "v": 1})
    c.img.command("collMod", "c", changeStreamPreAndPostImages={"enabled": True})
    cid = stream("c", {"fullDocument": "whenAvailable", "fullDocumentBeforeChange": "required"})
    c.img.c.update_one({"_id": 1}, {"$set": {"v": 2}})
    c.img.c.delete_one({"_id": 1})
    u, d = wait_for(lambda: more("c", cid) or None)
    assert u["fullDocumentBeforeChange"] == {"_id": 1, "v": 1} and u["fullDocument"] == {"_id": 1, "v": 2}
    assert d["fullDocumentBeforeChange"] == {"_id": 1, "v": 2}
    c.img.create_collection("plain")
    c.img.plain.insert_one({"_id": 1})
    cid = stream("plain", {"fullDocumentBeforeChange": "required"})
    c.img.plain.delete_one({"_id": 1})
    with pytest.raises(OperationFailure) as ei:
        more("plain", cid)
    assert ei.value.code == 47


def test_black_hole_member(sim):
    """mongo-sim-spec §8.2 'black hole': the member accepts connections and never answers; the
    client times out; once the hole closes the member answers again."""
    c = sim.client(socketTimeoutMS=400, retryReads=False)
    c.bh.c.insert_one({"_id": 1})
    sim.control("black_hole", member=0, on=True)
    try:
        with pytest.raises(NetworkTimeout):
            c.bh.c.find_one({})
    finally:
        sim.control("black_hole", member=0, on=False)
    assert wait_for(lambda: _try(lambda: c.bh.c.find_one({})), timeout=15) == {"_id": 1}


def _try(fn):
    try:
        return fn()
    except pymongo.errors.PyMongoError:
        return None


def test_partial_reply_is_a_network_error(sim):
    """mongo-sim-spec §8.2 'network drop mid-reply (partial bytes)': half a reply then EOF is
    a network error for the client; a retryable read is retried once and succeeds."""
    c = sim.client(retryReads=False)
    c.pr.c.insert_one({"_id": 1})
    sim.control("fail", commands=["find"], partialReply=True, times=1)
    with pytest.raises(AutoReconnect):
        c.pr.c.find_one({})
    c2 = sim.client(retryReads=True)
    sim.control("fail", commands=["find"], partialReply=True, times=1)
    assert c2.pr.c.find_one({}) == {"_id": 1}


def test_no_majority_stalls_streams(sim):
    """mongo-sim-spec §3.1/§8.2 'no majority': w:1 writes succeed but change streams see
    nothing and their postBatchResumeToken stops; hello's majorityOpTime is frozen; events
    arrive once the majority point moves again."""
    c = sim.client()
    with c.nm.c.watch(max_await_time_ms=200) as s:
        assert s.try_next() is None
        sim.control("no_majority", on=True)
        t0 = s.resume_token["_data"]
        c.nm.c.insert_one({"_id": 1})
        assert s.try_next() is None and s.try_next() is None
        assert s.resume_token["_data"] == t0
        lw = c.admin.command("hello")["lastWrite"]
        assert lw["majorityOpTime"]["ts"] < lw["opTime"]["ts"]
        sim.control("no_majority", on=False)
        assert s.next()["documentKey"] == {"_id": 1}


def test_poison_event_is_not_resumable(sim):
    """mongo-sim-spec §3.12: an event larger than 16 MiB fails the getMore with 10334
    BSONObjectTooLarge (no resumable label) and fails again on every resume."""
    c = sim.client()
    coll = c.big.c
    with coll.watch(max_await_time_ms=200) as s:
        coll.insert_one({"_id": 0})
        tok = s.next()["_id"]
        sim.control("poison_event")
        coll.insert_one({"_id": 1})
        with pytest.raises(OperationFailure) as ei:
            s.next()
        assert ei.value.code == 10334 and not ei.value.details.get("errorLabels")
    # the resumed stream meets the event in its first batch: the aggregate itself fails
    with pytest.raises(OperationFailure) as ei:
        with coll.watch(resume_after=tok, max_await_time_ms=200) as s2:
            s2.next()
    assert ei.value.code == 10334


def test_large_transaction_chain_and_clock(sim):
    """mongo-sim-spec §5.4 (large transactions: applyOps chain with partialTxn, prevOpTime
    links and count on the last entry; events emitted at the commit entry with increasing
    txnOpIndex) and §8.2 'clock control' (cluster times jump with the wall clock)."""
    c = sim.client()
    before = c.admin.command("ping")["operationTime"]
    sim.control("clock", advance=3600)
    sim.control("txn_split", ops_per_entry=2)
    with c.lt.c.watch(max_await_time_ms=200) as s:
        sim.control("write", op="txn", ops=[{"op": "insert", "ns": "lt.c", "doc": {"_id": i}} for i in range(5)])
        evs = [s.next() for _ in range(5)]
    chain = list(c.local.oplog.rs.find({"o.applyOps": {"$exists": True}}).sort("$natural", 1))
    assert [e["o"].get("partialTxn", False) for e in chain] == [True, True, False]
    assert chain[-1]["o"]["count"] == 5 and chain[1]["prevOpTime"]["ts"] == chain[0]["ts"]
    assert [e["documentKey"]["_id"] for e in evs] == [0, 1, 2, 3, 4]
    assert len({e["clusterTime"] for e in evs}) == 1 and evs[0]["clusterTime"] == chain[-1]["ts"]
    assert evs[0]["clusterTime"].time >= before.time + 3600


def test_unknown_aggregate_field_rejected(sim):
    """mongo-sim-spec §3.2: an unknown top-level aggregate field (what mongoc 1.23 does with an
    option it does not know, e.g. showExpandedEvents) fails with 40415 on 5.0+."""
    c = sim.client()
    with pytest.raises(OperationFailure) as ei:
        c.u.command("aggregate", "c", pipeline=[{"$changeStream": {}}], cursor={}, showExpandedEvents=True)
    assert ei.value.code == 40415


def test_replication_lag_on_secondary(sim):
    """mongo-sim-spec §8.2 'replication lag': a lagging secondary's reads, oplog and hello
    lastWrite trail the primary; they catch up once the lag has passed."""
    c = sim.client()
    sim.control("lag", member=1, ms=1500)
    c.lag.c.insert_one({"_id": 1})
    d = pymongo.MongoClient(sim.members[1], directConnection=True, serverSelectionTimeoutMS=5000,
                            readPreference="secondaryPreferred")
    try:
        assert d.lag.c.find_one({"_id": 1}) is None
        tail = list(d.local.oplog.rs.find({"ns": "lag.c", "op": "i"}))
        assert tail == []
        p = c.admin.command("hello")["lastWrite"]["opTime"]["ts"]
        s = d.admin.command("hello")["lastWrite"]["opTime"]["ts"]
        assert s < p
        assert wait_for(lambda: d.lag.c.find_one({"_id": 1}), timeout=5) == {"_id": 1}
    finally:
        d.close()


def test_reconfig_add_and_remove_member(sim):
    """mongo-sim-spec §2.5 (a primary's host list is authoritative) and §8.2 'topology edit':
    an added member appears in the client's topology with a higher setVersion; a removed one
    answers as a ghost (isreplicaset, no setName) and leaves the topology."""
    c = sim.client(heartbeatFrequencyMS=500)
    c.admin.command("ping")
    r = sim.control("add_member")
    new = r["host"]
    assert c.admin.command("hello")["setVersion"] == 2
    wait_for(lambda: ("127.0.0.1", int(new.split(":")[1])) in c.nodes, timeout=10)
    sim.control("remove_member", member=1)
    gone = sim.members[1]
    d = pymongo.MongoClient(gone, directConnection=True, serverSelectionTimeoutMS=3000)
    try:
        h = d.admin.command("isMaster")
        assert h.get("isreplicaset") is True and "setName" not in h
    finally:
        d.close()
    assert gone not in c.admin.command("hello")["hosts"]
    wait_for(lambda: ("127.0.0.1", int(gone.split(":")[1])) not in c.nodes, timeout=10)
    c.rc.c.insert_one({"_id": 1})


def test_write_in_flight_during_stepdown(sim):
    """mongo-sim-spec §2.6 step 1: a write already running on the primary when it steps down
    fails with 11602 InterruptedDueToReplStateChange (RetryableWriteError label); the driver
    retries it once on the new primary and it is applied exactly once."""
    from pymongo import monitoring

    class Failures(monitoring.CommandListener):
        def __init__(self):
            self.codes = []

        def started(self, event):
            pass

        def succeeded(self, event):
            pass

        def failed(self, event):
            self.codes.append((event.command_name, event.failure.get("code")))

    fails = Failures()
    c = sim.client(retryWrites=True, event_listeners=[fails])
    c.ifl.c.insert_one({"_id": 0})
    sim.control("delay", command="insert", ms=1500, times=1)
    before = sim.control("counters")["commands"].get("insert", 0)
    t = threading.Thread(target=lambda: c.ifl.c.insert_one({"_id": 1}))
    t.start()
    wait_for(lambda: sim.control("counters")["commands"].get("insert", 0) > before)  # in flight
    sim.control("stepdown", elect=1)
    t.join(20)
    assert not t.is_alive()
    assert ("insert", 11602) in fails.codes
    assert c.ifl.c.count_documents({}) == 2
    assert sim.control("counters")["per_member"]["1"]["insert"] == 1


def test_stepping_down_state_and_hidden_member(sim):
    """mongo-sim-spec §2.6 step 1 (while stepping down: neither writable primary nor secondary,
    topologyVersion +1, then +1 again as secondary) and §2.3 (hidden member: secondary,
    passive, hidden, absent from hosts)."""
    d = pymongo.MongoClient(sim.members[0], directConnection=True, serverSelectionTimeoutMS=5000)
    try:
        c0 = d.admin.command("hello")["topologyVersion"]["counter"]
        th = threading.Thread(target=lambda: sim.control("stepdown", stepping_ms=1500, elect=1))
        th.start()
        h = wait_for(lambda: (lambda x: x if not x["isWritablePrimary"] else None)(d.admin.command("hello")))
        assert h["secondary"] is False and h["topologyVersion"]["counter"] == c0 + 1
        th.join(15)
        h = d.admin.command("hello")
        assert h["secondary"] is True and h["topologyVersion"]["counter"] >= c0 + 2
        sim.control("hide_member", member=2)
        h2 = pymongo.MongoClient(sim.members[2], directConnection=True, serverSelectionTimeoutMS=5000)
        try:
            hh = h2.admin.command("hello")
            assert hh["hidden"] is True and hh["passive"] is True and hh["secondary"] is True
            assert sim.members[2] not in hh["hosts"]
        finally:
            h2.close()
        assert sim.members[2] not in d.admin.command("hello")["hosts"]
    finally:
        d.close()


def test_restart_member_status_and_clear_faults(sim):
    """mongo-sim-spec §8.2 'member down / up' with a restart: the primary restarts, another
    member is elected, the restarted process has a new processId with counter 0 and no
    cursors, so the stream's cursor is gone and the driver resumes elsewhere; clear_faults
    removes pending fail rules."""
    c = sim.client()
    st0 = sim.control("status")["members"][0]
    with c.rs2.c.watch(max_await_time_ms=200) as s:
        c.rs2.c.insert_one({"_id": 1})
        assert s.next()["documentKey"] == {"_id": 1}
        sim.control("restart", member=0)
        st = sim.control("status")["members"]
        assert st[0]["processId"] != st0["processId"] and st[0]["counter"] == 0 and st[0]["cursors"] == 0
        assert st[1]["state"] == "PRIMARY" and st[0]["state"] == "SECONDARY"
        wait_for(lambda: _primary_addr(c) == sim.members[1], timeout=15)
        c.rs2.c.insert_one({"_id": 2})
        assert s.next()["documentKey"] == {"_id": 2}
    sim.control("fail", commands=["find"], code=6, times=5)
    sim.control("clear_faults")
    assert c.rs2.c.find_one({"_id": 2}) == {"_id": 2}
