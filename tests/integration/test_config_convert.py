"""`mongocdc config convert` (docs/MIGRATING.md): a Kafka Connect connector JSON
(3.x and 1.9 properties, with and without the worker's properties) and a Debezium
Server application.properties become mongocdc YAML that passes --validate;
every key that cannot be carried is named on stderr; only unreadable input
fails (exit 1)."""

import yaml

from conftest import SOURCE_DIR

FIX = SOURCE_DIR / "tests" / "fixtures" / "debezium-config"


def _convert(run, tmp, name, *extra):
    r = run("config", "convert", FIX / name, *extra)
    assert r.returncode == 0, r.stderr
    out = tmp / (name + ".yaml")
    out.write_bytes(r.stdout)
    v = run("--validate", "-c", out)
    assert v.returncode == 0, v.stderr + r.stdout
    return yaml.safe_load(r.stdout), r.stderr.decode(), r.stdout.decode()


def test_connector_json_3x_with_worker(run_mongocdc, tmp_workdir):
    y, err, text = _convert(run_mongocdc, tmp_workdir, "connect-3x.json",
                            "--worker", FIX / "connect-worker.properties")
    assert y["debezium.compatibility"] == "3.x"
    assert y["topic.prefix"] == "dbserver1"
    assert y["mongodb.connection.string"].startswith("mongodb://debezium:dbz@mongodb:27017/")
    assert y["collection.include.list"] == "inventory\\.customers,inventory\\.orders"
    assert y["capture.mode"] == "change_streams_update_full_with_pre_image"
    assert y["signal.data.collection"] == "inventory.debezium_signal"
    assert y["signal.enabled.channels"] == "source,kafka"
    assert y["heartbeat.interval.ms"] == "10000" and y["tombstones.on.delete"] is True
    assert y["key.converter.schemas.enable"] is False and y["value.converter.schemas.enable"] is False
    assert y["offsets.storage"] == "kafka" and y["offsets.topic"] == "my-connect-offsets"
    assert y["offsets.flush.interval.ms"] == "10000"
    assert y["kafka"] == {"bootstrap.servers": "kafka1:9092,kafka2:9092",
                          "security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN",
                          "compression.type": "lz4"}
    for key in ("errors.tolerance", "transforms", "transforms.unwrap.type",
                "producer sasl.jaas.config"):
        assert "%s: not carried" % key in err, key
    assert "mongodb.authentication.class: carried, but" in err
    # the connector's name keys the offsets ["inventory-connector",{...}]
    assert y["name"] == "inventory-connector"


def test_connector_json_19_without_worker(run_mongocdc, tmp_workdir):
    y, err, _ = _convert(run_mongocdc, tmp_workdir, "connect-19.json")
    assert y["debezium.compatibility"] == "1.9" and y["name"] == "legacy-mongo"
    assert y["topic.prefix"] == "fulfillment"  # mongodb.name under its current name
    assert y["mongodb.hosts"] == "rs0/mongo1:27017,mongo2:27017"
    assert y["snapshot.max.threads"] == "2"  # initial.sync.max.threads
    assert y["key.converter.schemas.enable"] is True  # JsonConverter's default, said so
    assert "key.converter.schemas.enable not found" in err
    assert y["kafka"]["bootstrap.servers"] == "localhost:9092"
    assert "bootstrap.servers not found" in err
    assert "database.history.kafka.topic: not carried" in err


def test_debezium_server_properties(run_mongocdc, tmp_workdir):
    y, err, text = _convert(run_mongocdc, tmp_workdir, "server-application.properties")
    assert y["topic.prefix"] == "tutorial"
    assert y["name"] == "kafka"  # the sink type names Debezium Server's engine
    assert "name set to \"kafka\"" in err
    # a continued line, its leading blanks dropped, \\ unescaped once
    assert y["collection.include.list"] == "inventory\\.customers, inventory\\.orders"
    assert y["snapshot.mode"] == "when_needed" and y["skipped.operations"] == "none"
    assert y["value.converter.schemas.enable"] is False
    assert y["sink.type"] == "kafka"
    assert y["kafka"] == {"bootstrap.servers": "kafka:9092", "compression.type": "zstd"}
    assert y["offsets.storage"] == "file"
    assert "--from debezium-file:data/offsets.dat --to store" in err
    assert y["offsets.flush.interval.ms"] == "1" and y["log.level"] == "info"
    for key in ("debezium.transforms", "debezium.transforms.unwrap.type",
                "quarkus.log.console.json", "producer key.serializer",
                "producer value.serializer"):
        assert "%s: not carried" % key in err, key


def test_unreadable_input_fails(run_mongocdc, tmp_workdir):
    r = run_mongocdc("config", "convert", tmp_workdir / "missing.json")
    assert r.returncode == 1 and b"missing.json" in r.stderr
    (tmp_workdir / "x.json").write_text("{\"a\": [1, 2")
    r = run_mongocdc("config", "convert", tmp_workdir / "x.json")
    assert r.returncode == 1 and b"not JSON" in r.stderr
    (tmp_workdir / "y.properties").write_text("foo=bar\n")
    r = run_mongocdc("config", "convert", tmp_workdir / "y.properties")
    assert r.returncode == 1 and b"no debezium.source" in r.stderr
    r = run_mongocdc("config", "convert")
    assert r.returncode == 2
