"""mongocdc check: the preflight against a good setup and against each
failing condition (wrong credentials with --auth, pre-images off, a tiny
full oplog, an unreachable Kafka)."""
import re

import pytest

from pipeline_support import Sim, write_config


def lines(r):
    return r.stdout.decode().splitlines()


def verdict(r, check):
    """Verdicts (PASS/FAIL/WARN/SKIP) of every line of one check."""
    return [ln.split()[0] for ln in lines(r) if re.match(r"^\w+\s+%s:" % re.escape(check), ln)]


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


def test_check_covers_kafka_used_only_by_the_signal_channel(tmp_workdir, users_sim, kafka,
                                                           run_mongocdc):
    """File sink and file offsets, Kafka only for signal.enabled.channels kafka: check tests
    that cluster (FAIL when it does not answer, WARN for a missing signal topic) instead of
    skipping Kafka."""
    import kafka_support
    opts = {"signal.enabled.channels": "source,kafka",
            "signal.data.collection": "sample_mflix.signals",
            "signal.kafka.bootstrap.servers": "127.0.0.1:1"}
    r = run_mongocdc("check", "-c", write_config(tmp_workdir, users_sim.uri, **opts),
                     timeout_s=90)
    out = r.stdout.decode()
    assert r.returncode == 1, out
    assert verdict(r, "kafka-signal") == ["FAIL"], out
    assert "signal.kafka.bootstrap.servers" in out
    assert verdict(r, "kafka") == ["SKIP"], out
    topic = kafka_support.unique_topic("mcdc-check-signal")
    opts.update({"signal.kafka.bootstrap.servers": kafka.bootstrap, "signal.kafka.topic": topic})
    r = run_mongocdc("check", "-c", write_config(tmp_workdir, users_sim.uri, **opts),
                     timeout_s=90)
    out = r.stdout.decode()
    assert verdict(r, "kafka-signal") == ["WARN"] and "does not exist yet" in out, out
    kafka_support.create_topic(kafka, topic, partitions=1)
    r = run_mongocdc("check", "-c", write_config(tmp_workdir, users_sim.uri, **opts),
                     timeout_s=90)
    out = r.stdout.decode()
    assert r.returncode == 0, out
    assert verdict(r, "kafka-signal") == ["PASS"] and "1 partition(s)" in out, out


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


def test_daemon_logs_an_authentication_failure_under_the_task_name(tmp_workdir, start_mongocdc):
    """Wrong credentials: the task's lines carry the replica set the connection string names,
    not [capture] (hello never answered, so the set is not confirmed yet)."""
    sim = Sim(tmp_workdir, extra=["--auth", "cdc:secret"])
    try:
        cfg = write_config(tmp_workdir, sim.uri, **{"mongodb.user": "cdc",
                                                    "mongodb.password": "wrong",
                                                    "connect.max.attempts": 2,
                                                    "connect.backoff.initial.delay.ms": 100})
        d = start_mongocdc("-c", cfg)
        rc = d.proc.wait(timeout=60)
        err = d.stderr()
        assert rc == 1, err
        assert re.search(r"ERROR \[rs0\] capture of rs0 stopped: .*[Aa]uthentication failed", err), err
        assert "capture task rs0 failed" in err, err
        assert "[capture]" not in err, err
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


def _auth_uri(sim, user, pwd):
    uri = sim.uri.replace("mongodb://", "mongodb://%s:%s@" % (user, pwd), 1)
    return uri + ("&" if "?" in uri else "/?") + "authSource=admin"


def _access(r):
    return [ln for ln in lines(r) if re.match(r"^\w+\s+access:", ln)]


@pytest.fixture
def roles_sim(tmp_workdir):
    """--auth with a root user and users of the simulator's built-in roles (SPEC-NOTES.md)."""
    sim = Sim(tmp_workdir, extra=["--auth", "admin:pw",
                                  "--auth", "reader:pw:read@shop",
                                  "--auth", "anyreader:pw:readAnyDatabase",
                                  "--auth", "shopper:pw:read@shop,clusterMonitor",
                                  "--auth", "cdc:pw:readAnyDatabase,read@local,readWrite@shop"])
    root = sim.client(username="admin", password="pw", authSource="admin")
    root.shop.orders.insert_many([{"_id": i} for i in range(3)])
    root.other.items.insert_one({"_id": 1})
    yield sim
    sim.stop()


def test_check_names_each_missing_privilege(tmp_workdir, roles_sim, run_mongocdc):
    """A user with read on one database: the whole-deployment change stream, the oplog,
    listDatabases and the signal collection each get a line naming the privilege, the
    resource, what needs it and a role that grants it."""
    cfg = write_config(tmp_workdir, _auth_uri(roles_sim, "reader", "pw"),
                       **{"collection.include.list": "shop\\..*",
                          "signal.data.collection": "shop.signals"})
    r = run_mongocdc("check", "-c", cfg, timeout_s=60)
    out = r.stdout.decode()
    acc = _access(r)
    assert r.returncode == 1, out
    assert any(ln.startswith("FAIL") and "missing privilege changeStream and find on every database"
               in ln and "readAnyDatabase" in ln and "not authorized on admin" in ln for ln in acc), out
    assert "PASS  access: find allowed on all 1 captured collections" in out
    assert any(ln.startswith("WARN") and "missing privilege find on local.oplog.rs" in ln and
               "oplog headroom metric" in ln and "read on local" in ln for ln in acc), out
    assert any(ln.startswith("WARN") and "missing privilege collStats on local.oplog.rs" in ln
               for ln in acc), out
    assert any(ln.startswith("WARN") and "missing privilege listDatabases on the cluster" in ln
               for ln in acc), out
    assert any(ln.startswith("FAIL") and "missing privilege insert on shop.signals" in ln and
               "readWrite on shop" in ln for ln in acc), out
    assert out.rstrip().endswith("failed: access")


def test_check_oplog_mode_needs_find_on_the_oplog(tmp_workdir, roles_sim, run_mongocdc):
    """readAnyDatabase leaves local out: change streams pass, capture.mode oplog fails on
    local.oplog.rs (a WARN in change-stream mode)."""
    uri = _auth_uri(roles_sim, "anyreader", "pw")
    r = run_mongocdc("check", "-c", write_config(tmp_workdir, uri, **{"capture.mode": "oplog"}),
                     timeout_s=60)
    out = r.stdout.decode()
    assert r.returncode == 1, out
    assert "PASS  access: change stream opened" in out
    assert any(ln.startswith("FAIL") and "missing privilege find on local.oplog.rs, which "
               "capture.mode oplog needs" in ln for ln in _access(r)), out
    r = run_mongocdc("check", "-c", write_config(tmp_workdir, uri), timeout_s=60)
    assert r.returncode == 0, r.stdout.decode()
    assert "WARN  access: missing privilege find on local.oplog.rs" in r.stdout.decode()


def test_check_names_list_collections_when_a_database_cannot_be_listed(tmp_workdir, roles_sim,
                                                                       run_mongocdc):
    """clusterMonitor shows every database (listDatabases) but grants no listCollections on
    them: the collection list of the captured databases fails, naming the privilege."""
    cfg = write_config(tmp_workdir, _auth_uri(roles_sim, "shopper", "pw"))
    r = run_mongocdc("check", "-c", cfg, timeout_s=60)
    out = r.stdout.decode()
    assert r.returncode == 1, out
    assert any(ln.startswith("FAIL") and "missing privilege listCollections" in ln and
               "not authorized on other" in ln for ln in _access(r)), out


def test_check_passes_with_the_documented_roles(tmp_workdir, roles_sim, run_mongocdc):
    """readAnyDatabase + read on local + readWrite on the signal collection's database is
    enough for everything check looks at, in both capture modes (docs/OPERATIONS.md)."""
    uri = _auth_uri(roles_sim, "cdc", "pw")
    for mode in ("change_streams_update_full", "oplog"):
        cfg = write_config(tmp_workdir, uri, **{"capture.mode": mode,
                                                "signal.data.collection": "shop.signals"})
        r = run_mongocdc("check", "-c", cfg, timeout_s=60)
        out = r.stdout.decode()
        assert r.returncode == 0, out
        assert not [ln for ln in _access(r) if not ln.startswith("PASS")], out


def test_check_while_the_daemon_runs(tmp_workdir, users_sim, run_mongocdc, start_mongocdc,
                                     wait_until_fn):
    """The daemon holds the offsets file's lock for its whole run: check says it is running
    (a WARN, not a failure) and still reads the stored position."""
    cfg = write_config(tmp_workdir, users_sim.uri)
    d = start_mongocdc("-c", cfg)
    wait_until_fn(lambda: (tmp_workdir / "offsets.json").exists() and "streaming" in d.stderr(),
                  60, "the daemon streaming with a stored position")
    r = run_mongocdc("check", "-c", cfg, timeout_s=60)
    out = r.stdout.decode()
    assert d.running()
    d.stop()
    assert r.returncode == 0, out
    assert "WARN  offsets: a mongocdc daemon is running on" in out
    assert "stored position of rs0 is inside the oplog" in out, out
    assert "cannot open the offset store" not in out


def test_check_probe_is_no_signal_to_a_running_daemon(tmp_workdir, users_sim, run_mongocdc,
                                                       start_mongocdc, wait_until_fn):
    """check proves the signal collection's privileges with an insert and a delete of
    {_id: "mongocdc-check"}; a daemon capturing that collection skips it without a WARN
    (docs/OPERATIONS.md), and later signals still run."""
    cfg = write_config(tmp_workdir, users_sim.uri,
                       **{"signal.data.collection": "sample_mflix.signals"})
    d = start_mongocdc("-c", cfg)
    wait_until_fn(lambda: "streaming" in d.stderr(), 60, "the daemon streaming")
    r = run_mongocdc("check", "-c", cfg, timeout_s=60)
    out = r.stdout.decode()
    assert "PASS  access: insert and delete on signal.data.collection" in out, out
    users_sim.client().sample_mflix.signals.insert_one(
        {"_id": "after-check", "type": "log", "data": {"message": "after-check-marker"}})
    wait_until_fn(lambda: "after-check-marker" in d.stderr(), 60, "the signal after the check")
    err = d.stderr()
    assert d.running()
    d.stop()
    assert "mongocdc-check" not in err, err[-3000:]


def test_check_names_the_host_it_cannot_reach(tmp_workdir, run_mongocdc):
    """A dead host: the first connection error with the host, not libmongoc's later
    "No servers yet eligible for rescan"."""
    cfg = write_config(tmp_workdir, "mongodb://127.0.0.1:1/?replicaSet=rs0")
    r = run_mongocdc("check", "-c", cfg, timeout_s=90)
    out = r.stdout.decode()
    assert r.returncode == 1, out
    assert "FAIL  mongodb: cannot connect or authenticate to 127.0.0.1:1: " in out
    assert "No servers yet eligible" not in out


def test_daemon_stops_on_a_missing_privilege_with_a_short_message(tmp_workdir, roles_sim,
                                                                  start_mongocdc):
    """13 Unauthorized is fatal (no retry loop), and the log says which command was refused
    and where the privilege is named, not the server's whole echoed command."""
    cfg = write_config(tmp_workdir, _auth_uri(roles_sim, "reader", "pw"))
    d = start_mongocdc("-c", cfg)
    rc = d.proc.wait(timeout=60)
    err = d.stderr()
    assert rc == 1, err
    assert ("not authorized on admin to execute command aggregate (error 13 Unauthorized: the user "
            "lacks a privilege; `mongocdc check -c FILE` names it)") in err, err
    assert "lsid" not in err


def test_check_names_find_refused_on_a_collection(tmp_workdir, users_sim, run_mongocdc):
    """A collection the user may list but not read (a custom role can do that): the line
    names find on that collection and the role that grants it."""
    users_sim.control("fail", commands=["find"], times=1, code=13,
                      errmsg='not authorized on sample_mflix to execute command { find: "users" }')
    r = run_mongocdc("check", "-c", write_config(tmp_workdir, users_sim.uri), timeout_s=60)
    out = r.stdout.decode()
    assert r.returncode == 1, out
    assert ("FAIL  access: missing privilege find on sample_mflix.users, which the snapshot and "
            "updateLookup need: grant the role read on sample_mflix (server: not authorized on "
            "sample_mflix)") in out, out


def test_check_privileges_on_a_sharded_cluster(tmp_workdir, run_mongocdc):
    """Through mongos: config.shards needs find on config (clusterMonitor); with it and the
    documented roles every shard passes."""
    from conftest import import_mongosim
    mongosim = import_mongosim()
    sim = mongosim.MongoSim(topology="sharded", shards=2, members=1, noop_interval=0,
                            auth=["admin:pw", "reader:pw:read@shop",
                                  "cdc:pw:readAnyDatabase,read@local,clusterMonitor"])
    sim.start()
    try:
        sim.client(username="admin", password="pw").shop.orders.insert_one({"_id": 1})
        r = run_mongocdc("check", "-c", write_config(tmp_workdir, sim.uri_for("reader", "pw")),
                         timeout_s=60)
        out = r.stdout.decode()
        assert r.returncode == 1, out
        assert ("FAIL  shards: missing privilege find on config.shards, which finding the shards "
                "of the cluster needs") in out and "clusterMonitor" in out, out
        r = run_mongocdc("check", "-c", write_config(tmp_workdir, sim.uri_for("cdc", "pw")),
                         timeout_s=60)
        out = r.stdout.decode()
        assert r.returncode == 0, out
        assert "2 shards in config.shards" in out
        assert not [ln for ln in _access(r) if not ln.startswith("PASS")], out
    finally:
        sim.stop()
