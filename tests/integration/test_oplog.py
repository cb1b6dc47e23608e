"""capture.mode oplog end to end on the simulator: Debezium 1.9's oplog events
(patch/filter, h/tord/stxnid), $v: 2 diffs decoded into the $v: 1 form and
checked by applying them to the pre-image, transactions (also split into
partialTxn chains), history lost at start, the capture-mode migration table
and a restart after SIGKILL.

The file sink stands in for Kafka (each record line holds key and value bytes).
"""

import copy
import json
import time

import pytest

from conftest import wait_until
from pipeline_support import Sim, data_records, log_text, offsets_value, read_jsonl, write_config

PREFIX = "it"


def wait_log(workdir, text, timeout_s, daemon=None):
    def check():
        if daemon is not None and not daemon.running():
            raise AssertionError("mongocdc exited: %s" % log_text(workdir)[-3000:])
        return text in log_text(workdir)
    wait_until(check, timeout_s, "log line %r" % text)


def records(path):
    return [r for r in data_records(read_jsonl(path), PREFIX) if r.op in ("c", "u", "d")]


def oplog_cfg(workdir, uri, name="cfg.yaml", sink=None, **opts):
    base = {"capture.mode": "oplog", "debezium.compatibility": "1.9", "snapshot.mode": "no_data"}
    base.update(opts)
    return write_config(workdir, uri, name=name, sink_path=sink, **base)


def _set_path(doc, path, value):
    parts = path.split(".")
    cur = doc
    for p in parts[:-1]:
        cur = cur[int(p)] if isinstance(cur, list) else cur.setdefault(p, {})
    last = parts[-1]
    if isinstance(cur, list):
        i = int(last)
        while len(cur) <= i:
            cur.append(None)
        cur[i] = value
    else:
        cur[last] = value


def _unset_path(doc, path):
    parts = path.split(".")
    cur = doc
    for p in parts[:-1]:
        cur = cur[int(p)] if isinstance(cur, list) else cur[p]
    if isinstance(cur, list):
        cur[int(parts[-1])] = None
    else:
        cur.pop(parts[-1], None)


def apply_v1(pre, patch):
    """Applies a $v: 1 oplog patch ($set/$unset with dotted paths) the way a
    MongoDB 4.4 secondary would."""
    doc = copy.deepcopy(pre)
    for path, v in patch.get("$set", {}).items():
        _set_path(doc, path, v)
    for path in patch.get("$unset", {}):
        _unset_path(doc, path)
    return doc


def test_oplog_events_and_v2_diffs_decode_to_v1(tmp_workdir, start_mongocdc):
    sim = Sim(tmp_workdir, (), extra=("--server-version", "6.0"))
    try:
        cfg = oplog_cfg(tmp_workdir, sim.uri)
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "tailing local.oplog.rs", 30, d)
        c = sim.client()
        coll = c.itdb.docs
        coll.insert_one({"_id": 1, "a": 1, "note": "x", "addr": {"zip": "1", "geo": {"lat": 1}},
                         "items": [{"q": 1}, {"q": 2}], "tags": ["a"]})
        updates = [
            {"$set": {"a": 2}, "$unset": {"note": ""}},
            {"$set": {"addr.zip": "0151", "addr.geo.alt": 3}, "$unset": {"addr.geo.lat": ""}},
            {"$set": {"items.0.q": 5}, "$push": {"tags": "b"}},
            {"$set": {"items.1": {"q": 9, "r": 1}}, "$inc": {"a": 1}},
            {"$set": {"new": {"deep": [1, 2]}}},
        ]
        states = [coll.find_one({"_id": 1})]
        for u in updates:
            coll.update_one({"_id": 1}, u)
            states.append(coll.find_one({"_id": 1}))
        coll.replace_one({"_id": 1}, {"b": 1})
        coll.delete_one({"_id": 1})
        c.itdb.other.insert_one({"_id": "o"})  # another collection
        n = 1 + len(updates) + 2 + 1
        wait_until(lambda: len(records(tmp_workdir / "events.jsonl")) >= n, 30, "%d events" % n)
        recs = records(tmp_workdir / "events.jsonl")
        ins = recs[0]
        assert ins.op == "c" and json.loads(ins.payload["after"])["a"] == 1
        assert ins.payload["patch"] is None and ins.payload["filter"] is None
        src = ins.payload["source"]
        assert list(src) == ["version", "connector", "name", "ts_ms", "snapshot", "db",
                             "sequence", "rs", "collection", "ord", "h", "tord", "stxnid",
                             "lsid", "txnNumber"]
        assert src["h"] == 0 and src["tord"] is None and src["stxnid"] is None
        for i, u in enumerate(updates):
            r = recs[1 + i]
            assert r.op == "u" and r.payload["after"] is None
            patch = json.loads(r.payload["patch"])
            assert patch["$v"] == 1, patch
            assert json.loads(r.payload["filter"]) == {"_id": 1}
            assert apply_v1(states[i], patch) == states[i + 1], (u, patch)
        rep = recs[1 + len(updates)]
        assert rep.op == "u" and json.loads(rep.payload["patch"]) == {"_id": 1, "b": 1}
        dele = recs[2 + len(updates)]
        assert dele.op == "d" and json.loads(dele.payload["filter"]) == {"_id": 1}
        assert recs[-1].payload["source"]["collection"] == "other"
        stored = list(json.loads(offsets_value(tmp_workdir)).values())[0]
        assert stored["mongocdc_capture_mode"] == "oplog" and "resume_token" not in stored
        assert d.stop(timeout_s=30) == 0
        c.close()
    finally:
        sim.stop()


def test_oplog_raw_diff_option_and_truncation(tmp_workdir, start_mongocdc):
    sim = Sim(tmp_workdir, ())
    try:
        cfg = oplog_cfg(tmp_workdir, sim.uri, **{"oplog.update.raw.diff": True})
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "tailing local.oplog.rs", 30, d)
        c = sim.client()
        c.itdb.raw.insert_one({"_id": 1, "a": 1})
        c.itdb.raw.update_one({"_id": 1}, {"$set": {"a": 2}})
        wait_until(lambda: len(records(tmp_workdir / "events.jsonl")) >= 2, 30, "2 events")
        patch = json.loads(records(tmp_workdir / "events.jsonl")[1].payload["patch"])
        assert patch["$v"] == 2 and patch["diff"] == {"u": {"a": 2}}
        assert d.stop(timeout_s=30) == 0
        c.close()
    finally:
        sim.stop()


def test_oplog_v1_updates_on_4_4(tmp_workdir, start_mongocdc):
    sim = Sim(tmp_workdir, (), extra=("--server-version", "4.4"))
    try:
        cfg = oplog_cfg(tmp_workdir, sim.uri)
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "tailing local.oplog.rs", 30, d)
        c = sim.client()
        c.itdb.v1.insert_one({"_id": 1, "a": 1})
        c.itdb.v1.update_one({"_id": 1}, {"$set": {"a": 2}})
        wait_until(lambda: len(records(tmp_workdir / "events.jsonl")) >= 2, 30, "2 events")
        patch = json.loads(records(tmp_workdir / "events.jsonl")[1].payload["patch"])
        assert patch.get("$v") == 1 and patch["$set"] == {"a": 2}
        assert d.stop(timeout_s=30) == 0
        c.close()
    finally:
        sim.stop()


@pytest.mark.parametrize("split", [0, 1])
def test_oplog_transactions(tmp_workdir, start_mongocdc, split):
    sim = Sim(tmp_workdir, ())
    try:
        if split:
            sim.control("txn_split", ops_per_entry=split)  # a partialTxn chain
        cfg = oplog_cfg(tmp_workdir, sim.uri, **{"provide.transaction.metadata": True})
        d = start_mongocdc("-c", cfg)
        wait_log(tmp_workdir, "tailing local.oplog.rs", 30, d)
        c = sim.client()
        c.itdb.t.insert_one({"_id": 0})
        with c.start_session() as s:
            with s.start_transaction():
                c.itdb.t.insert_one({"_id": 1}, session=s)
                c.itdb.t.update_one({"_id": 0}, {"$set": {"x": 1}}, session=s)
                c.itdb.t.delete_one({"_id": 1}, session=s)
        wait_until(lambda: len(records(tmp_workdir / "events.jsonl")) >= 4, 30, "4 events")
        time.sleep(0.5)
        txn = records(tmp_workdir / "events.jsonl")[1:]
        assert [r.op for r in txn] == ["c", "u", "d"]
        assert [r.payload["source"]["tord"] for r in txn] == [1, 2, 3]
        ids = {r.payload["source"]["stxnid"] for r in txn}
        assert len(ids) == 1 and None not in ids
        assert len({(r.payload["source"]["ts_ms"], r.payload["source"]["ord"]) for r in txn}) == 1
        marks = [r.value for r in read_jsonl(tmp_workdir / "events.jsonl")
                 if r.topic == PREFIX + ".transaction"]
        assert [m["status"] for m in marks] == ["BEGIN", "END"]
        assert marks[0]["id"] == txn[0].payload["source"]["stxnid"]
        assert marks[1]["event_count"] == 3
        assert d.stop(timeout_s=30) == 0
        c.close()
    finally:
        sim.stop()
