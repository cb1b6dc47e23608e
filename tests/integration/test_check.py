"""mongocdc check: the preflight against a good setup and against each
failing condition (wrong credentials with --auth, pre-images off, a tiny
full oplog, an unreachable Kafka)."""
import re

import pytest

from pipeline_support import Sim, dataset_loads, write_config


def lines(r):
    return r.stdout.decode().splitlines()


def verdict(r, check):
    """Verdicts (PASS/FAIL/WARN/SKIP) of every line of one check."""
    return [ln.split()[0] for ln in lines(r) if re.match(r"^\w+\s+%s:" % re.escape(check), ln)]


@pytest.fixture
def users_sim(tmp_workdir, shared_dir):
    sim = Sim(tmp_workdir, dataset_loads(shared_dir, only={"sample_mflix.users"}))
    yield sim
    sim.stop()


def test_check_passes_on_a_good_setup(tmp_workdir, users_sim, kafka, run_mongocdc):
    import kafka_support
    cfg = write_config(tmp_workdir, users_sim.uri, kafka={"bootstrap.servers": kafka.bootstrap},
                       **{"offsets.storage": "kafka",
                          "offsets.topic": kafka_support.unique_topic("mcdc-check-offsets")})
    r = run_mongocdc("check", "-c", cfg, timeout_s=60)
    out = r.stdout.decode()
    assert r.returncode == 0, out + r.stderr.decode()
    assert "FAIL" not in out and out.rstrip().endswith("OK: every check passed")
    assert verdict(r, "mongodb") == ["PASS"] and "replica set rs0" in out
    assert "find allowed on all 1 captured collections" in out
    assert verdict(r, "kafka") == ["PASS"]
    assert verdict(r, "offsets-topic") == ["PASS"]
    assert verdict(r, "oplog") == ["PASS"]


def test_check_fails_with_wrong_credentials(tmp_workdir, run_mongocdc):
    sim = Sim(tmp_workdir, extra=["--auth", "cdc:secret"])
    try:
        uri = sim.uri.replace("mongodb://", "mongodb://cdc:wrong@", 1)
        if "authSource" not in uri:
            uri += "&authSource=admin"
        r = run_mongocdc("check", "-c", write_config(tmp_workdir, uri), timeout_s=60)
        assert r.returncode == 1
        assert verdict(r, "mongodb") == ["FAIL"]
        assert "FAILED: 1 check(s) failed: mongodb" in r.stdout.decode()
        good = sim.uri.replace("mongodb://", "mongodb://cdc:secret@", 1)
        if "authSource" not in good:
            good += "&authSource=admin"
        r = run_mongocdc("check", "-c", write_config(tmp_workdir, good), timeout_s=60)
        assert r.returncode == 0, r.stdout.decode()
    finally:
        sim.stop()


def test_check_fails_when_pre_images_are_off(tmp_workdir, users_sim, run_mongocdc):
    c = users_sim.client()
    c.shop.create_collection("orders")
    c.shop.create_collection("carts", changeStreamPreAndPostImages={"enabled": True})
    cfg = write_config(tmp_workdir, users_sim.uri,
                       **{"debezium.compatibility": "3.x",
                          "capture.mode": "change_streams_update_full_with_pre_image",
                          "collection.include.list": "shop\\..*"})
    r = run_mongocdc("check", "-c", cfg, timeout_s=60)
    out = r.stdout.decode()
    assert r.returncode == 1, out
    assert "FAIL  pre-images: shop.orders has changeStreamPreAndPostImages off" in out
    assert "shop.carts" not in out
    c.shop.command("collMod", "orders", changeStreamPreAndPostImages={"enabled": True})
    r = run_mongocdc("check", "-c", cfg, timeout_s=60)
    assert r.returncode == 0, r.stdout.decode()
    assert "PASS  pre-images: enabled on all 2 captured collections" in r.stdout.decode()


def test_simulator_pre_images_switch_shows_in_list_collections(tmp_workdir, run_mongocdc):
    sim = Sim(tmp_workdir, extra=["--pre-images"])
    try:
        sim.client().shop.orders.insert_one({"_id": 1})
        cfg = write_config(tmp_workdir, sim.uri,
                           **{"debezium.compatibility": "3.x",
                              "capture.mode": "change_streams_with_pre_image",
                              "collection.include.list": "shop\\..*"})
        r = run_mongocdc("check", "-c", cfg, timeout_s=60)
        assert r.returncode == 0, r.stdout.decode()
        assert verdict(r, "pre-images") == ["PASS"]
    finally:
        sim.stop()


def test_check_fails_on_a_tiny_full_oplog(tmp_workdir, run_mongocdc):
    sim = Sim(tmp_workdir, extra=["--oplog-size-mb", "0.05"])
    try:
        c = sim.client()
        for i in range(300):
            c.itdb.busy.insert_one({"_id": i, "pad": "x" * 500})
        cfg = write_config(tmp_workdir, sim.uri, **{"offsets.flush.interval.ms": 60000})
        r = run_mongocdc("check", "-c", cfg, timeout_s=60)
        out = r.stdout.decode()
        assert r.returncode == 1, out
        assert verdict(r, "oplog") == ["FAIL"], out
        assert "offsets.flush.interval.ms is 60000 ms" in out and "replSetResizeOplog" in out
    finally:
        sim.stop()


def test_check_fails_when_kafka_is_unreachable(tmp_workdir, users_sim, run_mongocdc):
    cfg = write_config(tmp_workdir, users_sim.uri,
                       kafka={"bootstrap.servers": "127.0.0.1:1"})
    r = run_mongocdc("check", "-c", cfg, timeout_s=60)
    out = r.stdout.decode()
    assert r.returncode == 1, out
    assert verdict(r, "kafka") == ["FAIL"]
    assert "FAILED: 1 check(s) failed: kafka" in out


@pytest.mark.parametrize("seed", ["mongos", "config_servers"])
def test_check_on_a_sharded_cluster_checks_every_shard(tmp_workdir, run_mongocdc, seed):
    """From a mongos or the config servers, as the daemon itself: config.shards,
    then each shard's replica set on the connection string its task uses."""
    from conftest import import_mongosim
    mongosim = import_mongosim()
    sim = mongosim.MongoSim(topology="sharded", shards=2, members=1)
    sim.start()
    try:
        c = sim.client()
        c.admin.command("enableSharding", "shop")
        c.admin.command("shardCollection", "shop.orders", key={"_id": 1})
        c.shop.orders.insert_many([{"_id": i} for i in range(10)])
        uri = sim.uri if seed == "mongos" else sim.config_uri
        r = run_mongocdc("check", "-c", write_config(tmp_workdir, uri), timeout_s=60)
        out = r.stdout.decode()
        assert r.returncode == 0, out + r.stderr.decode()
        assert ("through mongos" if seed == "mongos" else "config server replica set") in out
        assert "2 shards in config.shards" in out
        for shard in ("shard01", "shard02"):
            assert "replica set %s" % shard in out, out
            assert "no stored position for %s" % shard in out, out
        assert verdict(r, "oplog").count("PASS") == 2, out
        c.close()
    finally:
        sim.stop()
