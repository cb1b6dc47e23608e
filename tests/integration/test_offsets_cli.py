"""`mongocdc offsets` (docs/MIGRATING.md): show, export/import as JSON lines,
copy between a file store, a Kafka topic (librdkafka's mock cluster) and a
Debezium offsets file (FileOffsetBackingStore, tests/fixtures/dbz-offsets was
written by Kafka's own class), set by timestamp or resume token, reset, and
the refusal while a daemon holds the file store's lock. No MongoDB needed:
the configuration's connection string is never dialled by this command."""

import fcntl
import os
import json
import shutil

import pytest

from conftest import SOURCE_DIR

FIXTURES = SOURCE_DIR / "tests" / "fixtures" / "dbz-offsets"
DBZ_RS0 = '["inventory-connector",{"rs":"rs0","server_id":"dbserver1"}]'
DBZ_SHARD1 = '["inventory-connector",{"rs":"shard1","server_id":"dbserver1"}]'
TOKEN_HEX = "82655B1C00000000032B022C0100296E5A1004"


def _config(workdir, offsets="file", extra=""):
    p = workdir / "c.yaml"
    store = ("offsets:\n  file.path: %s\n" % (workdir / "offsets.json") if offsets == "file"
             else "offsets:\n  storage: kafka\n  topic: connect-offsets\n"
             "kafka:\n  test.mock.num.brokers: \"1\"\n")
    p.write_text("topic.prefix: dbserver1\n"
                 "mongodb.connection.string: \"mongodb://localhost:1/?replicaSet=rs0\"\n"
                 "sink:\n  type: stdout\n" + store + extra)
    return p


def _export(run, cfg, *ep):
    r = run("offsets", "export", "-c", cfg, *ep)
    assert r.returncode == 0, r.stderr
    return {json.loads(l)["key"]: json.loads(l)["value"] for l in r.stdout.decode().splitlines()}


def test_show_decodes_a_debezium_file(run_mongocdc, tmp_workdir):
    cfg = _config(tmp_workdir)
    shutil.copy(FIXTURES / "three-19.dat", tmp_workdir / "dbz.dat")
    r = run_mongocdc("offsets", "show", "-c", cfg, "--from", "debezium-file:dbz.dat")
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    # the null value of ["other",...] is no stored position
    assert "2 entries" in out and '["other"' not in out
    assert DBZ_RS0 in out and DBZ_SHARD1 in out
    assert "token _data:   %s" % TOKEN_HEX in out
    assert "_data hex (Debezium 1.x-2.6 form)" in out
    assert "snapshot in progress: yes" in out  # shard1 has initsync
    assert "2023-11-14T22:13:20Z (sec 1700000000, ord 3)" in out
    assert "writer:        Debezium 1.x" in out  # told by its "h" key
    assert "layout:        1.9: partition {rs, server_id}" in out


def test_copy_debezium_file_to_store_and_back_byte_for_byte(run_mongocdc, tmp_workdir):
    cfg = _config(tmp_workdir)
    shutil.copy(FIXTURES / "three-19.dat", tmp_workdir / "dbz.dat")
    r = run_mongocdc("offsets", "copy", "-c", cfg, "--from", "debezium-file:dbz.dat",
                     "--to", "store")
    assert r.returncode == 0, r.stderr
    stored = json.loads((tmp_workdir / "offsets.json").read_text())
    assert set(stored) == {DBZ_RS0, DBZ_SHARD1}
    assert stored[DBZ_RS0]["resume_token"] == TOKEN_HEX
    assert stored[DBZ_SHARD1]["initsync"] is True
    # and back into a new Debezium file: the value bytes are Debezium's own
    r = run_mongocdc("offsets", "copy", "-c", cfg, "--from", "store",
                     "--to", "debezium-file:back.dat")
    assert r.returncode == 0, r.stderr
    assert b"has no lock" in r.stderr
    raw = (tmp_workdir / "back.dat").read_bytes()
    assert raw.startswith(b"\xac\xed\x00\x05sr\x00\x11java.util.HashMap")
    assert (b'{"sec":1700000000,"ord":3,"h":null,"resume_token":"%s"}' % TOKEN_HEX.encode()) in raw
    assert _export(run_mongocdc, cfg, "--from", "debezium-file:back.dat") == \
        _export(run_mongocdc, cfg, "--from", "debezium-file:dbz.dat")


def test_set_reset_export_import(run_mongocdc, tmp_workdir):
    ours_rs0 = '["dbserver1",{"rs":"rs0","server_id":"dbserver1"}]'
    ours_single = '["dbserver1",{"server_id":"dbserver1"}]'
    # the 1.9 layout (default): the replica set's partition (rs from the connection
    # string), the value as Debezium 1.9 writes it (hex token, "h")
    cfg = _config(tmp_workdir)
    r = run_mongocdc("offsets", "set", "-c", cfg, "--resume-token", TOKEN_HEX)
    assert r.returncode == 0, r.stderr
    got = _export(run_mongocdc, cfg)
    assert got[ours_rs0]["resume_token"] == TOKEN_HEX and got[ours_rs0]["h"] is None
    # the token's clusterTime fills sec/ord
    assert got[ours_rs0]["sec"] == 0x655B1C00 and got[ours_rs0]["ord"] == 3
    # the 3.x layout: {server_id}, the token stored whole (Base64 of its BSON)
    cfg3 = _config(tmp_workdir, extra='debezium.compatibility: "3.x"\nname: inventory-connector\n')
    single = '["inventory-connector",{"server_id":"dbserver1"}]'
    r = run_mongocdc("offsets", "set", "-c", cfg3, "--timestamp", "1700000123:7")
    assert r.returncode == 0, r.stderr
    got = _export(run_mongocdc, cfg3)
    assert got[single]["sec"] == 1700000123 and got[single]["ord"] == 7
    r = run_mongocdc("offsets", "set", "-c", cfg3, "--resume-token", TOKEN_HEX)
    assert r.returncode == 0, r.stderr
    b64 = _export(run_mongocdc, cfg3)[single]["resume_token"]
    assert b64.startswith("NwAAAAJfZGF0YQ")
    # the three token forms give the same position
    for form in (b64, json.dumps({"_data": TOKEN_HEX})):
        r = run_mongocdc("offsets", "set", "-c", cfg3, "--key", "[\"x\",{\"server_id\":\"y\"}]",
                         "--resume-token", form)
        assert r.returncode == 0, r.stderr
        # another source's key: warned about, written, listed with --all only
        assert b"will not adopt it" in r.stderr
        assert _export(run_mongocdc, cfg3, "--all")['["x",{"server_id":"y"}]']["resume_token"] \
            == b64
        assert '["x",{"server_id":"y"}]' not in _export(run_mongocdc, cfg3)
    # an ISO time
    r = run_mongocdc("offsets", "set", "-c", cfg3, "--timestamp", "2026-01-02T03:04:05Z")
    assert r.returncode == 0, r.stderr
    assert _export(run_mongocdc, cfg3)[single]["sec"] == 1767323045
    shown = run_mongocdc("offsets", "show", "-c", cfg3).stdout.decode()
    # the name's and (older mongocdc) topic.prefix's entries; not ["x",...]
    assert shown.count("this config:   yes") == 2
    r = run_mongocdc("offsets", "reset", "-c", cfg3)
    assert r.returncode == 0, r.stderr
    assert single not in _export(run_mongocdc, cfg3)
    assert ours_single not in _export(run_mongocdc, cfg3)
    # export then import into another file store: same entries
    r = run_mongocdc("offsets", "export", "-c", cfg, "-o", "all.jsonl")
    assert r.returncode == 0, r.stderr
    r = run_mongocdc("offsets", "import", "-c", cfg, "--to", "file:%s" % (tmp_workdir / "o2.json"),
                     "-i", "all.jsonl")
    assert r.returncode == 0, r.stderr
    assert _export(run_mongocdc, cfg, "--from", "file:%s" % (tmp_workdir / "o2.json")) == \
        _export(run_mongocdc, cfg)


def test_bad_input_is_refused_and_nothing_written(run_mongocdc, tmp_workdir):
    cfg = _config(tmp_workdir)
    (tmp_workdir / "bad.jsonl").write_text(
        json.dumps({"key": '["a",{"server_id":"a"}]', "value": {"sec": 5, "ord": 1}}) + "\n" +
        json.dumps({"key": '["b",{"server_id":"b"}]', "value": {}}) + "\n")
    r = run_mongocdc("offsets", "import", "-c", cfg, "-i", "bad.jsonl")
    assert r.returncode == 1
    assert b"refused" in r.stderr and b"no usable position" in r.stderr
    assert not (tmp_workdir / "offsets.json").exists()
    (tmp_workdir / "notjson.jsonl").write_text("{nope\n")
    r = run_mongocdc("offsets", "import", "-c", cfg, "-i", "notjson.jsonl")
    assert r.returncode == 1 and b"notjson.jsonl:1:" in r.stderr
    (tmp_workdir / "garbage.dat").write_bytes(b"\xac\xed\x00\x05sr\x00\x03abc")
    r = run_mongocdc("offsets", "show", "-c", cfg, "--from", "debezium-file:garbage.dat")
    assert r.returncode == 1 and b"not a Kafka Connect FileOffsetBackingStore file" in r.stderr
    r = run_mongocdc("offsets", "set", "-c", cfg, "--timestamp", "yesterday")
    assert r.returncode == 2
    r = run_mongocdc("offsets", "copy", "-c", cfg, "--from", "store")
    assert r.returncode == 2
    r = run_mongocdc("offsets", "show", "-c", cfg, "--from", "nowhere:x")
    assert r.returncode == 2


def test_refused_while_a_daemon_holds_the_file_store(run_mongocdc, tmp_workdir):
    """The daemon holds an exclusive flock on <offsets.file.path>.lock for its
    whole run (store_file.c); a second holder is what a running daemon looks like."""
    cfg = _config(tmp_workdir)
    r = run_mongocdc("offsets", "set", "-c", cfg, "--timestamp", "1700000000:1")
    assert r.returncode == 0, r.stderr
    before = (tmp_workdir / "offsets.json").read_bytes()
    with open(tmp_workdir / "offsets.json.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        for args in (("reset",), ("set", "--timestamp", "1800000000:1"),
                     ("copy", "--from", "file:%s" % (tmp_workdir / "x.json"), "--to", "store")):
            r = run_mongocdc("offsets", args[0], "-c", cfg, *args[1:])
            assert r.returncode == 1, (args, r.stderr)
            assert b"in use by another mongocdc process" in r.stderr
        # reading is allowed
        r = run_mongocdc("offsets", "show", "-c", cfg)
        assert r.returncode == 0 and b"this config:   yes" in r.stdout
    assert (tmp_workdir / "offsets.json").read_bytes() == before


def test_copy_to_and_from_a_kafka_offsets_topic(run_mongocdc, tmp_workdir, kafka):
    """A Kafka Connect offsets topic: a Debezium file's entries copied into it
    and back into a file store read the same; a delete (reset) is a tombstone."""
    topic = "connect-offsets-%d" % id(tmp_workdir)
    cfg = tmp_workdir / "k.yaml"
    cfg.write_text("topic.prefix: dbserver1\n"
                   "mongodb.connection.string: \"mongodb://localhost:1/?replicaSet=rs0\"\n"
                   "offsets:\n  storage: kafka\n  topic: %s\n"
                   "kafka:\n  bootstrap.servers: \"%s\"\n"
                   "  compression.type: lz4\n" % (topic, kafka.bootstrap))
    shutil.copy(FIXTURES / "three-19.dat", tmp_workdir / "dbz.dat")
    r = run_mongocdc("offsets", "copy", "-c", cfg, "--from", "debezium-file:dbz.dat",
                     "--to", "store", timeout_s=90)
    assert r.returncode == 0, r.stderr
    assert b"wrote 2 entries to offsets topic " + topic.encode() in r.stderr
    assert b"cannot be detected" in r.stderr
    want = _export(run_mongocdc, cfg, "--from", "debezium-file:dbz.dat")
    assert _export(run_mongocdc, cfg) == want
    # the topic's reader is a consumer: the producer's compression.type is not given to it
    r = run_mongocdc("offsets", "show", "-c", cfg, timeout_s=90)
    assert r.returncode == 0 and b"producer property" not in r.stderr, r.stderr
    r = run_mongocdc("offsets", "copy", "-c", cfg, "--from", "store",
                     "--to", "file:%s" % (tmp_workdir / "from-kafka.json"), timeout_s=90)
    assert r.returncode == 0, r.stderr
    assert _export(run_mongocdc, cfg, "--from", "file:%s" % (tmp_workdir / "from-kafka.json")) == want
    r = run_mongocdc("offsets", "reset", "-c", cfg, "--key", DBZ_SHARD1, timeout_s=90)
    assert r.returncode == 0, r.stderr
    assert set(_export(run_mongocdc, cfg)) == {DBZ_RS0}


def test_debezium_1x_engine_file_keys_in_the_converter_envelope(run_mongocdc, tmp_workdir):
    """Debezium 1.x's embedded engine (Debezium Server 1.x) writes its offsets keys
    as {"schema":null,"payload":[name,{...}]} (engine-19.dat was written by
    Debezium 1.9.8's engine): read without the envelope, written back in it."""
    cfg = _config(tmp_workdir)
    shutil.copy(FIXTURES / "engine-19.dat", tmp_workdir / "dbz.dat")
    assert b'{"schema":null,"payload":["inventory-connector"' in (tmp_workdir / "dbz.dat").read_bytes()
    got = _export(run_mongocdc, cfg, "--from", "debezium-file:dbz.dat")
    (key, value), = got.items()
    assert key == '["inventory-connector",{"rs":"rs0","server_id":"dbserver1"}]'
    assert "resume_token" in value
    r = run_mongocdc("offsets", "copy", "-c", cfg, "--from", "debezium-file:dbz.dat", "--to", "store")
    assert r.returncode == 0, r.stderr
    assert list(json.loads((tmp_workdir / "offsets.json").read_text())) == [key]
    r = run_mongocdc("offsets", "set", "-c", cfg, "--key", key, "--timestamp", "1800000000:1")
    assert r.returncode == 0, r.stderr
    r = run_mongocdc("offsets", "copy", "-c", cfg, "--from", "store", "--to", "debezium-file:dbz.dat")
    assert r.returncode == 0, r.stderr
    raw = (tmp_workdir / "dbz.dat").read_bytes()
    assert raw.count(b'{"schema":null,"payload":["inventory-connector"') == 1
    assert raw.count(b'["inventory-connector"') == 1  # no second, unwrapped entry
    assert _export(run_mongocdc, cfg, "--from", "debezium-file:dbz.dat")[key]["sec"] == 1800000000


def test_set_addresses_the_layouts_partition(run_mongocdc, tmp_workdir):
    """Without --key, set writes under [name, the configured layout's partition]:
    1.9 needs the replica set's name (connection string or --rs); a merged
    (mongos) stream is {rs: "cluster"} in 1.9 and {server_id} in 3.x."""
    p = tmp_workdir / "n.yaml"
    base = ("topic.prefix: dbserver1\nname: inv\nsink:\n  type: stdout\n"
            "offsets:\n  file.path: %s\n" % (tmp_workdir / "o.json"))
    p.write_text(base + "mongodb.connection.string: \"mongodb://h:1/\"\n")
    r = run_mongocdc("offsets", "set", "-c", p, "--timestamp", "1700000000:1")
    assert r.returncode == 2 and b"give --rs RS" in r.stderr
    r = run_mongocdc("offsets", "set", "-c", p, "--rs", "shard01", "--timestamp", "1700000000:1")
    assert r.returncode == 0, r.stderr
    assert '["inv",{"rs":"shard01","server_id":"dbserver1"}]' in _export(run_mongocdc, p)
    p.write_text(base + "mongodb.connection.string: \"mongodb://h:1/\"\n"
                 "mongodb.connection.mode: sharded\n")
    r = run_mongocdc("offsets", "set", "-c", p, "--timestamp", "1700000000:2")
    assert r.returncode == 0, r.stderr
    assert '["inv",{"rs":"cluster","server_id":"dbserver1"}]' in _export(run_mongocdc, p)
    p.write_text(base + "mongodb.connection.string: \"mongodb://h:1/\"\n"
                 "mongodb.connection.mode: sharded\ndebezium.compatibility: \"3.x\"\n")
    r = run_mongocdc("offsets", "set", "-c", p, "--timestamp", "1700000000:3")
    assert r.returncode == 0, r.stderr
    assert _export(run_mongocdc, p)['["inv",{"server_id":"dbserver1"}]']["ord"] == 3


def test_import_and_copy_never_move_a_position_backwards(run_mongocdc, tmp_workdir):
    """import and copy refuse (unless --force) to replace a stored position by
    an older one under the same key, naming the key; set moves it on purpose."""
    cfg = _config(tmp_workdir)
    key = '["dbserver1",{"rs":"rs0","server_id":"dbserver1"}]'
    r = run_mongocdc("offsets", "set", "-c", cfg, "--timestamp", "1700000100:1")
    assert r.returncode == 0, r.stderr
    before = (tmp_workdir / "offsets.json").read_bytes()
    older = tmp_workdir / "older.jsonl"
    older.write_text(json.dumps({"key": key, "value": {"sec": 1700000000, "ord": 5}}) + "\n")
    r = run_mongocdc("offsets", "import", "-c", cfg, "-i", older)
    assert r.returncode == 1
    assert b"refused: " + key.encode() in r.stderr and b"Timestamp(1700000000, 5)" in r.stderr
    assert (tmp_workdir / "offsets.json").read_bytes() == before
    # copy from a file store holding the older position: refused as well
    cfg_old = _config(tmp_workdir / "old" if (tmp_workdir / "old").mkdir() is None else None)
    r = run_mongocdc("offsets", "import", "-c", cfg_old, "-i", older)
    assert r.returncode == 0, r.stderr
    r = run_mongocdc("offsets", "copy", "-c", cfg, "--from",
                     "file:%s" % (tmp_workdir / "old" / "offsets.json"), "--to", "store")
    assert r.returncode == 1 and b"would move backwards" in r.stderr
    assert (tmp_workdir / "offsets.json").read_bytes() == before
    # a newer one is written; --force writes an older one, with a warning
    newer = tmp_workdir / "newer.jsonl"
    newer.write_text(json.dumps({"key": key, "value": {"sec": 1700000200, "ord": 1}}) + "\n")
    r = run_mongocdc("offsets", "import", "-c", cfg, "-i", newer)
    assert r.returncode == 0, r.stderr
    r = run_mongocdc("offsets", "import", "-c", cfg, "-i", older, "--force")
    assert r.returncode == 0 and b"warning: " + key.encode() in r.stderr
    assert _export(run_mongocdc, cfg)[key]["sec"] == 1700000000


def test_shared_offsets_topic_other_connectors_left_alone(run_mongocdc, tmp_workdir):
    """A Kafka Connect offsets topic shared with other connectors: show, export
    and copy take this source's entries (--all: every one); show marks another
    connector's entry as not used and gives no advice to remove it."""
    cfg = _config(tmp_workdir)
    pg_key = '["pg-connector",{"server":"pg1"}]'
    other_mongo = '["billing",{"server_id":"billing1"}]'
    ours = '["dbserver1",{"rs":"rs0","server_id":"dbserver1"}]'
    lines = [{"key": pg_key, "value": {"lsn": 123, "txId": 5}},
             {"key": other_mongo, "value": {"sec": 1700000000, "ord": 1}},
             {"key": ours, "value": {"sec": 1700000000, "ord": 2}}]
    (tmp_workdir / "shared.jsonl").write_text("".join(json.dumps(l) + "\n" for l in lines))
    shared = "file:%s" % (tmp_workdir / "shared.json")
    r = run_mongocdc("offsets", "import", "-c", cfg, "--to", shared, "-i", "shared.jsonl",
                     "--force")
    assert r.returncode == 0, r.stderr
    # copy to a Debezium file: this source's entry only, no refusal
    r = run_mongocdc("offsets", "copy", "-c", cfg, "--from", shared, "--to",
                     "debezium-file:x.dat")
    assert r.returncode == 0, r.stderr
    assert b"2 entries of other connectors" in r.stderr
    assert set(_export(run_mongocdc, cfg, "--from", "debezium-file:x.dat", "--all")) == {ours}
    # show: this source's entry by default
    r = run_mongocdc("offsets", "show", "-c", cfg, "--from", shared)
    out = r.stdout.decode()
    assert r.returncode == 0 and ours in out and pg_key not in out and other_mongo not in out
    assert b"--all" in r.stderr
    # --all: the others are marked, not decoded, never "remove the entry"
    out = run_mongocdc("offsets", "show", "-c", cfg, "--from", shared, "--all").stdout.decode()
    assert pg_key in out and other_mongo in out
    assert out.count("another connector's entry, not used") == 2
    assert "remove the entry" not in out and "UNUSABLE" not in out
    assert set(_export(run_mongocdc, cfg, "--from", shared, "--all")) == {pg_key, other_mongo, ours}
    assert set(_export(run_mongocdc, cfg, "--from", shared)) == {ours}


def test_set_validates_rs_and_key(run_mongocdc, tmp_workdir):
    """set/reset: a malformed --key is refused; --rs must be a replica set the
    configuration can have; show's "this config: yes" follows the daemon's
    adoption rule byte for byte (field order included)."""
    cfg = _config(tmp_workdir)
    for bad in ("notjson", '["x"]', '[1,{}]', '{"a":1}'):
        r = run_mongocdc("offsets", "set", "-c", cfg, "--key", bad, "--timestamp", "1700000000")
        assert r.returncode == 2 and b"not a Kafka Connect partition key" in r.stderr, bad
    r = run_mongocdc("offsets", "set", "-c", cfg, "--rs", "rs9", "--timestamp", "1700000000")
    assert r.returncode == 2 and b"names replicaSet rs0" in r.stderr, r.stderr
    assert not (tmp_workdir / "offsets.json").exists()
    # a key with the partition's fields in another order is not what the daemon looks up
    swapped = '["dbserver1",{"server_id":"dbserver1","rs":"rs0"}]'
    r = run_mongocdc("offsets", "set", "-c", cfg, "--key", swapped, "--timestamp", "1700000000")
    assert r.returncode == 0 and b"will not adopt it" in r.stderr, r.stderr
    # a replica set the connection string does not name: not adopted either
    other_rs = '["dbserver1",{"rs":"rs9","server_id":"dbserver1"}]'
    r = run_mongocdc("offsets", "set", "-c", cfg, "--key", other_rs, "--timestamp", "1700000000")
    assert r.returncode == 0 and b"will not adopt it" in r.stderr, r.stderr
    r = run_mongocdc("offsets", "set", "-c", cfg, "--rs", "rs0", "--timestamp", "1700000000")
    assert r.returncode == 0, r.stderr
    out = run_mongocdc("offsets", "show", "-c", cfg).stdout.decode()
    blocks = {b.split("\n")[0]: b for b in out.split("\n[")[1:]}
    blocks = {"[" + k: v for k, v in blocks.items()}
    assert "this config:   yes" in blocks['["dbserver1",{"rs":"rs0","server_id":"dbserver1"}]']
    assert "this config:   no" in blocks[swapped] and "this config:   no" in blocks[other_rs]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the case of `sudo mongocdc offsets`")
def test_root_keeps_the_daemon_users_ownership(run_mongocdc, tmp_workdir):
    """Run as root (sudo), set/copy leave the store's files (the offsets file,
    its lock, a Debezium file) with the owner of the folder or of the file
    they replace, so that the daemon's user can still open them."""
    store = tmp_workdir / "store"
    store.mkdir()
    os.chown(store, 4242, 4343)
    cfg = tmp_workdir / "c.yaml"
    cfg.write_text("topic.prefix: dbserver1\n"
                   "mongodb.connection.string: \"mongodb://localhost:1/?replicaSet=rs0\"\n"
                   "sink:\n  type: stdout\noffsets:\n  file.path: %s\n" % (store / "offsets.json"))
    r = run_mongocdc("offsets", "set", "-c", cfg, "--timestamp", "1700000000:1")
    assert r.returncode == 0, r.stderr
    for f in ("offsets.json", "offsets.json.lock"):
        st = os.stat(store / f)
        assert (st.st_uid, st.st_gid) == (4242, 4343), f
    # a Debezium Server file owned by its user, mode 0600: kept on rewrite
    dbz = store / "dbz.dat"
    shutil.copy(FIXTURES / "three-19.dat", dbz)
    os.chown(dbz, 5151, 5252)
    os.chmod(dbz, 0o600)
    r = run_mongocdc("offsets", "copy", "-c", cfg, "--from", "store",
                     "--to", "debezium-file:%s" % dbz)
    assert r.returncode == 0, r.stderr
    st = os.stat(dbz)
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (5151, 5252, 0o600)
