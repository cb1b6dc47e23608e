"""`mongocdc config convert` (docs/MIGRATING.md): a Kafka Connect connector JSON
(3.x and 1.9 properties, with and without the worker's properties) and a Debezium
Server application.properties become mongocdc YAML that passes --validate;
every key that cannot be carried is named on stderr; only unreadable input
fails (exit 1)."""

import json

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
    # the PLAIN JAAS line's username and password are librdkafka's sasl.username/password
    assert y["kafka"] == {"bootstrap.servers": "kafka1:9092,kafka2:9092",
                          "security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN",
                          "compression.type": "lz4", "sasl.username": "u",
                          "sasl.password": "p"}
    assert "sasl.jaas.config: not carried" not in err
    for key in ("errors.tolerance", "transforms", "transforms.unwrap.type"):
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


def test_debezium_1x_filter_names_carried(run_mongocdc, tmp_workdir):
    """Debezium 1.x's deprecated filter names become the current ones: dropping
    them would capture every collection."""
    src = tmp_workdir / "connect-1x-names.json"
    src.write_text(json.dumps({"name": "old-mongo", "config": {
        "connector.class": "io.debezium.connector.mongodb.MongoDbConnector",
        "mongodb.hosts": "rs0/mongo1:27017", "mongodb.name": "shop1",
        "collection.whitelist": "shop.products", "database.blacklist": "admin",
        "field.blacklist": "shop.products.secret"}}))
    r = run_mongocdc("config", "convert", src)
    assert r.returncode == 0, r.stderr
    y = yaml.safe_load(r.stdout)
    assert y["collection.include.list"] == "shop.products"
    assert y["database.exclude.list"] == "admin"
    assert y["field.exclude.list"] == "shop.products.secret"
    for old in ("collection.whitelist", "database.blacklist", "field.blacklist"):
        assert old not in y and (old + ": not carried").encode() not in r.stderr
    # both names given: the current one wins, as in Debezium, and the old is named
    src.write_text(json.dumps({"name": "old-mongo", "config": {
        "mongodb.hosts": "rs0/mongo1:27017", "mongodb.name": "shop1",
        "collection.whitelist": "shop.a", "collection.include.list": "shop.b"}}))
    r = run_mongocdc("config", "convert", src)
    assert r.returncode == 0, r.stderr
    assert yaml.safe_load(r.stdout)["collection.include.list"] == "shop.b"
    assert b"collection.whitelist: not carried" in r.stderr


def test_other_converter_or_connector_refused(run_mongocdc, tmp_workdir):
    """A converter other than JsonConverter, or another connector class, is an
    error (exit 1), never a quiet 'not carried'."""
    base = {"mongodb.connection.string": "mongodb://m:27017/?replicaSet=rs0",
            "topic.prefix": "p1"}
    src = tmp_workdir / "c.json"
    for extra, needle in (
            ({"value.converter": "io.confluent.connect.avro.AvroConverter"},
             b"ERROR: value.converter=io.confluent.connect.avro.AvroConverter"),
            ({"key.converter": "io.confluent.connect.avro.AvroConverter"},
             b"ERROR: key.converter="),
            ({"connector.class": "io.debezium.connector.postgresql.PostgresConnector"},
             b"ERROR: connector.class=io.debezium.connector.postgresql")):
        src.write_text(json.dumps({"name": "n", "config": dict(base, **extra)}))
        r = run_mongocdc("config", "convert", src)
        assert r.returncode == 1 and needle in r.stderr, r.stderr
    props = tmp_workdir / "application.properties"
    props.write_text("debezium.sink.type=kafka\n"
                     "debezium.source.connector.class=io.debezium.connector.mongodb.MongoDbConnector\n"
                     "debezium.source.topic.prefix=p1\n"
                     "debezium.source.mongodb.connection.string=mongodb://m:27017/?replicaSet=rs0\n"
                     "debezium.format.value=avro\n")
    r = run_mongocdc("config", "convert", props)
    assert r.returncode == 1 and b"ERROR: debezium.format.value=avro" in r.stderr, r.stderr


def test_config_object_without_name_and_standalone_worker(run_mongocdc, tmp_workdir):
    """The bare config object (GET /connectors/NAME/config) names no connector:
    a loud warning, or --name NAME. A standalone worker's offsets file means
    a file store and the copy command, not connect-offsets."""
    cfg = {"connector.class": "io.debezium.connector.mongodb.MongoDbConnector",
           "mongodb.connection.string": "mongodb://m:27017/?replicaSet=rs0",
           "topic.prefix": "p1"}
    src = tmp_workdir / "config-only.json"
    src.write_text(json.dumps(cfg))
    r = run_mongocdc("config", "convert", src)
    assert r.returncode == 0, r.stderr
    y = yaml.safe_load(r.stdout)
    assert "name" not in y
    assert b"WARNING: the input holds no connector \"name\"" in r.stderr
    assert b"# WARNING: the input names no connector" in r.stdout
    r = run_mongocdc("config", "convert", src, "--name", "inventory-connector")
    assert r.returncode == 0, r.stderr
    assert yaml.safe_load(r.stdout)["name"] == "inventory-connector"
    assert b"WARNING" not in r.stderr
    worker = tmp_workdir / "connect-standalone.properties"
    worker.write_text("bootstrap.servers=k:9092\n"
                      "key.converter.schemas.enable=false\nvalue.converter.schemas.enable=false\n"
                      "offset.storage.file.filename=/var/lib/connect/connect.offsets\n")
    out = tmp_workdir / "standalone.yaml"
    r = run_mongocdc("config", "convert", src, "--name", "n", "--worker", worker)
    assert r.returncode == 0, r.stderr
    out.write_bytes(r.stdout)
    y = yaml.safe_load(r.stdout)
    assert y["offsets.storage"] == "file" and "offsets.topic" not in y
    assert b"--from debezium-file:/var/lib/connect/connect.offsets --to store" in r.stderr
    assert b"connect-offsets" not in r.stderr
    v = run_mongocdc("--validate", "-c", out)
    assert v.returncode == 0, v.stderr


def test_server_kafka_offsets_and_java_producer_names(run_mongocdc, tmp_workdir):
    """Debezium Server: max.request.size is librdkafka's message.max.bytes; a
    KafkaOffsetBackingStore's cluster (debezium.source.bootstrap.servers) is
    carried when the sink names none, named when it differs; its other
    offset.storage.* settings are named; the schemas note speaks of
    debezium.format, not of a Connect worker."""
    head = ("debezium.sink.type=kafka\n"
            "debezium.source.connector.class=io.debezium.connector.mongodb.MongoDbConnector\n"
            "debezium.source.topic.prefix=p1\n"
            "debezium.source.mongodb.connection.string=mongodb://m:27017/?replicaSet=rs0\n"
            "debezium.source.offset.storage=org.apache.kafka.connect.storage.KafkaOffsetBackingStore\n"
            "debezium.source.offset.storage.topic=dbz-offsets\n"
            "debezium.source.offset.storage.partitions=1\n"
            "debezium.source.offset.storage.replication.factor=1\n"
            "debezium.source.bootstrap.servers=offs:9092\n"
            "debezium.sink.kafka.producer.max.request.size=2097152\n")
    src = tmp_workdir / "application.properties"
    src.write_text(head)
    r = run_mongocdc("config", "convert", src)
    assert r.returncode == 0, r.stderr
    y = yaml.safe_load(r.stdout)
    assert y["offsets.storage"] == "kafka" and y["offsets.topic"] == "dbz-offsets"
    assert y["kafka"]["bootstrap.servers"] == "offs:9092"
    assert y["kafka"]["message.max.bytes"] == "2097152"
    assert b"max.request.size" not in r.stderr
    for key in (b"offset.storage.partitions: not carried",
                b"offset.storage.replication.factor: not carried"):
        assert key in r.stderr, key
    assert b"Connect worker" not in r.stdout and b"debezium.format.key/value" in r.stdout
    out = tmp_workdir / "s.yaml"
    out.write_bytes(r.stdout)
    v = run_mongocdc("--validate", "-c", out)
    assert v.returncode == 0, v.stderr
    # the sink on another cluster: the offsets cluster is named, not merged
    src.write_text(head + "debezium.sink.kafka.producer.bootstrap.servers=sink:9092\n")
    r = run_mongocdc("config", "convert", src)
    assert r.returncode == 0, r.stderr
    assert yaml.safe_load(r.stdout)["kafka"]["bootstrap.servers"] == "sink:9092"
    assert b"debezium.source.bootstrap.servers: not carried: the offsets topic is on offs:9092" \
        in r.stderr
