"""Oversized change events, checked through pymongo 3.11 (mongo-sim-spec §3.12; manual
"$changeStreamSplitLargeEvent"; server change_stream_split_event_helpers.cpp and
document_source_change_stream_split_large_event.cpp):

- an event over the server's limit (BSONObjMaxInternalSize, 16 MiB + 16 KiB) fails the
  stream with 10334 BSONObjectTooLarge, measured after the stream's stages, so a stage
  before the output that shrinks or drops the event avoids the error;
- with `$changeStreamSplitLargeEvent` as the last stage it comes as fragments
  `{_id, splitEvent: {fragment, of}, <fields>}`: the fields other than `_id`, ordered by
  their BSON size (then name), packed greedily, each fragment under the limit; every
  fragment has its own resume token and resuming from one continues with the next fragment.

One test runs at the real 16 MiB limit; the others lower it with `--max-event-bytes` for speed.
"""

import pytest
from bson import encode
from pymongo.errors import OperationFailure

from conftest import MongoSim

SPLIT = [{"$changeStreamSplitLargeEvent": {}}]


def _elem_size(k, v):
    return len(encode({k: v})) - 5


@pytest.fixture(scope="module")
def small_sim():
    with MongoSim(topology="replset", members=1, noop_interval=1.0,
                  extra_args=["--max-event-bytes", "200000"]) as s:
        yield s


def _events(stream, n):
    out = []
    while len(out) < n:
        ev = stream.try_next()
        if ev is not None:
            out.append(ev)
    return out


def test_real_limit_update_with_lookup_splits_in_two(small_sim):
    """A 20 MiB update event (7 MiB updatedFields + a 13 MiB updateLookup document) at the
    real limit: two fragments, the small fields and updateDescription first, fullDocument
    alone in the second; each fragment under 16 MiB + 16 KiB; the merged fields equal the
    event's."""
    with MongoSim(topology="replset", members=1, noop_interval=1.0) as real:
        coll = real.client().ov.real
        coll.insert_one({"_id": 1, "a": "x" * (6 * 1024 * 1024)})
        with coll.watch(SPLIT, full_document="updateLookup", max_await_time_ms=200) as s:
            coll.update_one({"_id": 1}, {"$set": {"b": "y" * (7 * 1024 * 1024)}})
            f1, f2 = _events(s, 2)
    assert f1["splitEvent"] == {"fragment": 1, "of": 2} and f2["splitEvent"] == {"fragment": 2, "of": 2}
    assert list(f1)[:2] == ["_id", "splitEvent"] and list(f2) == ["_id", "splitEvent", "fullDocument"]
    assert "updateDescription" in f1 and "fullDocument" not in f1
    assert f1["updateDescription"]["updatedFields"]["b"] == "y" * (7 * 1024 * 1024)
    assert len(f2["fullDocument"]["a"]) == 6 * 1024 * 1024
    for f in (f1, f2):
        assert len(encode(f)) <= 16 * 1024 * 1024 + 16 * 1024
    assert f1["_id"] != f2["_id"] and f1["_id"]["_data"] < f2["_id"]["_data"]


def test_fields_ordered_by_size_and_packed_greedily(small_sim):
    """The fields other than _id, ordered by (BSON size, name), fill each fragment while the
    next one fits (splitChangeEvent); the order inside a fragment is that order."""
    with small_sim.client().ov.greedy2.watch(SPLIT, full_document="updateLookup",
                                             max_await_time_ms=200) as s:
        c2 = small_sim.client().ov.greedy2
        c2.insert_one({"_id": 1, "a": "x" * 100000})
        c2.update_one({"_id": 1}, {"$set": {"b": "y" * 90000}})
        got = _events(s, 3)
    ins, f1, f2 = got
    assert "splitEvent" not in ins
    assert f1["splitEvent"] == {"fragment": 1, "of": 2}
    fields = [k for k in f1 if k not in ("_id", "splitEvent")] + [k for k in f2 if k not in ("_id", "splitEvent")]
    sizes = [_elem_size(k, f1[k] if k in f1 else f2[k]) for k in fields]
    assert sizes == sorted(sizes), list(zip(fields, sizes))
    assert fields[-2:] == ["updateDescription", "fullDocument"]
    assert set(fields) == {"operationType", "clusterTime", "wallTime", "ns", "documentKey",
                           "updateDescription", "fullDocument"}


def test_resume_from_a_fragment_continues_with_the_next(small_sim):
    """Resuming from fragment 1's token gives fragment 2, then the next event; resuming from
    the last fragment gives the next event (manual: "a stream resumed from a fragment's
    token begins with the subsequent fragment")."""
    c = small_sim.client().ov.resume
    with c.watch(SPLIT, full_document="updateLookup", max_await_time_ms=200) as s:
        c.insert_one({"_id": 1, "a": "x" * 100000})
        c.update_one({"_id": 1}, {"$set": {"b": "y" * 90000}})
        c.insert_one({"_id": 2})
        ins, f1, f2, nxt = _events(s, 4)
    with c.watch(SPLIT, full_document="updateLookup", resume_after=f1["_id"], max_await_time_ms=200) as s:
        a, b = _events(s, 2)
    assert a["_id"] == f2["_id"] and a["splitEvent"] == {"fragment": 2, "of": 2}
    assert b["_id"] == nxt["_id"]
    with c.watch(SPLIT, full_document="updateLookup", resume_after=f2["_id"], max_await_time_ms=200) as s:
        assert _events(s, 1)[0]["_id"] == nxt["_id"]
    with c.watch(SPLIT, full_document="updateLookup", resume_after=ins["_id"], max_await_time_ms=200) as s:
        assert [e["_id"] for e in _events(s, 3)] == [f1["_id"], f2["_id"], nxt["_id"]]


def test_too_large_without_split_fails_after_the_stages(small_sim):
    """Without the split stage the stream fails with 10334 when it reaches the event, again
    on every resume; a $project that drops the large field before the output, or a $match
    that filters the event out, avoids it: the size is taken after the stages."""
    c = small_sim.client().ov.fail
    with c.watch(max_await_time_ms=200) as s:
        c.insert_one({"_id": 1, "big": "x" * 250000})
        with pytest.raises(OperationFailure) as e:
            s.try_next()
    assert e.value.code == 10334
    assert "BSONObj size: " in str(e.value) and "is invalid" in str(e.value)
    with c.watch([{"$project": {"fullDocument.big": 0}}], max_await_time_ms=200) as s:
        c.insert_one({"_id": 2, "big": "x" * 250000})
        ev = _events(s, 1)[0]
    assert ev["documentKey"] == {"_id": 2} and ev["fullDocument"] == {"_id": 2}
    with c.watch([{"$match": {"$expr": {"$lte": [{"$bsonSize": "$fullDocument"}, 100000]}}}],
                 max_await_time_ms=200) as s:
        c.insert_one({"_id": 3, "big": "x" * 250000})
        c.insert_one({"_id": 4})
        ev = _events(s, 1)[0]
    assert ev["documentKey"] == {"_id": 4}


def test_split_stage_only_last():
    """$changeStreamSplitLargeEvent anywhere but last fails at the aggregate; on a 5.0
    server it does not exist."""
    with MongoSim(topology="replset", members=1, server_version="5.0", noop_interval=1.0) as s50:
        with pytest.raises(OperationFailure):
            with s50.client().ov.x.watch(SPLIT) as s:
                s.try_next()
