"""The initial snapshot of one large collection split into `_id` ranges read in
parallel (snapshot.max.threads with snapshot.collection.split.min.documents;
src/snapshot/split.h): every document exactly once whatever the types of its
`_id`s, the collection's filter override applied to every range, one
`snapshot: last` record, and in a sharded cluster with orphans on a shard's
primary every document once, in its owner's version.

Every document carries a unique field `n`, so "exactly once" is checked on `n`
independently of how each `_id` type is rendered in the key.
"""

import datetime
import pytest
from bson import json_util
from bson.binary import Binary, UuidRepresentation
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.objectid import ObjectId
from bson.timestamp import Timestamp

from conftest import import_mongosim, wait_until
from pipeline_support import Sim, data_records, log_text, read_jsonl, write_config

PREFIX = "it"


def mixed_ids(n, maxkey=True):
    """n distinct `_id`s: mostly int32, and some of every other type an `_id` may have."""
    utc = datetime.timezone.utc
    other = [MinKey()] + ([MaxKey()] if maxkey else []) + [None, float("nan"), True, False, float("inf"), float("-inf"),
             Decimal128("0.25"), Decimal128("1E+300"), {}, {"a": 1}, {"a": {"b": 2}}]
    for i in range(40):
        other += ["s%05d" % i, ObjectId("%024x" % (i + 1)), Int64(10 ** 12 + i), i + 0.5,
                  datetime.datetime(2000 + i, 1, 1, tzinfo=utc), Timestamp(1000 + i, 1),
                  {"k": i}, Binary(bytes([i]) * (i % 7 + 1), [0, 1, 2, 3, 4, 5, 6, 8, 0x80][i % 9])]
    assert n > len(other)
    return list(range(n - len(other))) + other


def mixed_docs(n, maxkey=True):
    return [{"_id": v, "n": i, "pad": "x" * 16} for i, v in enumerate(mixed_ids(n, maxkey))]


def reads_of(path, topic):
    return [r for r in data_records(read_jsonl(path), PREFIX) if r.op == "r" and r.topic == topic]


JSON_OPTS = json_util.JSONOptions(uuid_representation=UuidRepresentation.UNSPECIFIED)


def ns_of(recs):
    return sorted(json_util.loads(r.payload["after"], json_options=JSON_OPTS)["n"] for r in recs)


@pytest.fixture
def big_sim(tmp_workdir):
    sim = Sim(tmp_workdir, members=1)
    c = sim.client()
    c.big.mixed.insert_many(mixed_docs(20000))
    c.big.small.insert_many([{"_id": i, "n": i} for i in range(50)])
    c.close()
    yield sim
    sim.stop()


def test_large_mixed_collection_split_over_four_threads(tmp_workdir, big_sim, run_mongocdc):
    cfg = write_config(tmp_workdir, big_sim.uri, raw={
        "snapshot.mode": "initial_only",
        "snapshot.max.threads": 4,
        "snapshot.collection.split.min.documents": 4000,
        "snapshot.fetch.size": 500,
    })
    r = run_mongocdc("-c", cfg, timeout_s=300)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    log = r.stderr.decode()
    assert "big.mixed: about 20000 documents split into 4 _id ranges" in log
    assert "big.small: about" not in log  # 50 documents: read whole
    recs = data_records(read_jsonl(tmp_workdir / "events.jsonl"), PREFIX)
    mixed = [r for r in recs if r.topic == PREFIX + ".big.mixed"]
    assert ns_of(mixed) == list(range(20000))  # every document once
    assert ns_of([r for r in recs if r.topic == PREFIX + ".big.small"]) == list(range(50))
    assert all(r.op == "r" for r in recs)
    assert [r.snapshot for r in recs].count("last") == 1 and recs[-1].snapshot == "last"


def test_filter_override_applies_to_every_range(tmp_workdir, big_sim, run_mongocdc):
    cfg = write_config(tmp_workdir, big_sim.uri, raw={
        "snapshot.mode": "initial_only",
        "snapshot.max.threads": 3,
        "snapshot.collection.split.min.documents": 2000,
        "snapshot.include.collection.list": "big\\.mixed",
        "snapshot.collection.filter.overrides": "big.mixed",
        "snapshot.collection.filter.overrides.big.mixed": '{"n": {"$mod": [3, 1]}}',
    })
    r = run_mongocdc("-c", cfg, timeout_s=300)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    assert "split into 3 _id ranges" in r.stderr.decode()
    reads = reads_of(tmp_workdir / "events.jsonl", PREFIX + ".big.mixed")
    assert ns_of(reads) == [n for n in range(20000) if n % 3 == 1]


def test_small_collection_or_one_thread_is_not_split(tmp_workdir, big_sim, run_mongocdc):
    cfg = write_config(tmp_workdir, big_sim.uri, raw={
        "snapshot.mode": "initial_only",
        "snapshot.max.threads": 1,
        "snapshot.collection.split.min.documents": 10,
        "snapshot.include.collection.list": "big\\.mixed",
    })
    r = run_mongocdc("-c", cfg, timeout_s=300)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    assert "_id ranges" not in r.stderr.decode()
    assert ns_of(reads_of(tmp_workdir / "events.jsonl", PREFIX + ".big.mixed")) == \
        list(range(20000))


def test_sharded_split_with_orphans_reads_every_document_once(tmp_workdir, start_mongocdc):
    """shop.big sharded on _id, split at 3000: [min, 3000) on shard01, [3000, max) (every
    non-number _id among them) moved to shard02 and back, so shard02's primary keeps them
    all as orphans. Each shard's task splits what it reads; the owned-chunk filter still
    drops the orphans from every range."""
    total = 6000
    mongosim = import_mongosim()
    sim = mongosim.MongoSim(topology="sharded", shards=2, members=1, noop_interval=0.3)
    sim.start()
    try:
        c = sim.client()
        c.admin.command("enableSharding", "shop")
        c.admin.command("shardCollection", "shop.big", key={"_id": 1})
        c.admin.command("split", "shop.big", middle={"_id": 3000})
        c.admin.command("moveChunk", "shop.big", find={"_id": 4000}, to="shard02")
        # no MaxKey: the simulator has no chunk for it (MongoDB's last chunk takes it)
        c.shop.big.insert_many(mixed_docs(total, maxkey=False))
        sim.control("orphans", keep=True)
        c.admin.command("moveChunk", "shop.big", find={"_id": 4000}, to="shard01")
        import pymongo
        direct = pymongo.MongoClient(sim.shard_uris["shard02"], serverSelectionTimeoutMS=10000)
        orphans = direct.shop.big.count_documents({})
        direct.close()
        assert orphans > 2500  # ints from 3000 and every non-number `_id`
        assert c.shop.big.count_documents({}) == total

        cfg = write_config(tmp_workdir, sim.uri, raw={
            "snapshot.max.threads": 4,
            "snapshot.collection.split.min.documents": 1000,
        })
        d = start_mongocdc("-c", cfg)

        def streaming():
            if not d.running():
                raise AssertionError("mongocdc exited: %s" % log_text(tmp_workdir)[-3000:])
            return log_text(tmp_workdir).count("streaming changes from") >= 2
        wait_until(streaming, 180, "both shards streaming")
        log = log_text(tmp_workdir)
        assert "orphans skipped" in log
        assert "_id ranges" in log
        reads = reads_of(tmp_workdir / "events.jsonl", PREFIX + ".shop.big")
        assert ns_of(reads) == list(range(total))
        assert d.stop(timeout_s=30) == 0
        c.close()
    finally:
        sim.stop()


def test_sigkill_mid_split_snapshot_redoes_it_whole(tmp_workdir, big_sim, start_mongocdc):
    """A split snapshot killed half-way stores nothing that says complete: the next start
    copies every range again (from a fresh sample) and then streams, every document in the
    second copy once and one `snapshot: last`."""
    c = big_sim.client()
    # slow getMores so that the kill lands in the middle of the ranges
    c.admin.command("configureFailPoint", "failCommand", mode="alwaysOn",
                    data={"failCommands": ["getMore"], "blockConnection": True, "blockTimeMS": 150})
    raw = {"snapshot.max.threads": 4, "snapshot.collection.split.min.documents": 4000,
           "snapshot.fetch.size": 250, "snapshot.include.collection.list": "big\\.mixed"}
    run1 = tmp_workdir / "run1.jsonl"
    cfg1 = write_config(tmp_workdir, big_sim.uri, name="run1.yaml", sink_path=run1, raw=raw)
    d = start_mongocdc("-c", cfg1)

    def copied():
        if not d.running():
            raise AssertionError("mongocdc exited: %s" % log_text(tmp_workdir)[-3000:])
        return run1.exists() and sum(1 for _ in open(run1, "rb")) >= 3000
    wait_until(copied, 120, "part of the snapshot")
    d.proc.kill()
    d.proc.wait(timeout=10)
    first = reads_of(run1, PREFIX + ".big.mixed")
    assert 0 < len(first) < 20000
    assert "last" not in [r.snapshot for r in first]
    off = tmp_workdir / "offsets.json"
    assert not off.exists() or "initsync" in off.read_text()

    c.admin.command("configureFailPoint", "failCommand", mode="off")
    run2 = tmp_workdir / "run2.jsonl"
    cfg2 = write_config(tmp_workdir, big_sim.uri, name="run2.yaml", sink_path=run2, raw=raw)
    d2 = start_mongocdc("-c", cfg2)

    def streaming():
        if not d2.running():
            raise AssertionError("mongocdc exited: %s" % log_text(tmp_workdir)[-3000:])
        return "streaming changes from" in log_text(tmp_workdir)
    wait_until(streaming, 180, "the second snapshot and streaming")
    assert "split into 4 _id ranges" in log_text(tmp_workdir)
    second = reads_of(run2, PREFIX + ".big.mixed")
    assert ns_of(second) == list(range(20000))
    assert [r.snapshot for r in second].count("last") == 1
    assert d2.stop(timeout_s=30) == 0
    assert "initsync" not in off.read_text()
    c.close()
