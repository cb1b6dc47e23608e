"""Debezium run the way users run it, for the switch tests (test_debezium_switch.py):

- ConnectWorker: a Kafka Connect DISTRIBUTED worker (org.apache.kafka.connect.cli.
  ConnectDistributed) with Debezium's MongoDB connector on its class path, its
  config/offsets/status topics on a real broker, the connector registered
  through the REST API. The jars are the oracle harness's (tests/debezium, built
  once into build/debezium-oracle/<version>/lib): Debezium 3.6.1 comes with
  Kafka Connect 4.3, Debezium 1.9.8 with Kafka Connect 3.2 (its era).
- Engine: Debezium's embedded engine with FileOffsetBackingStore, the offsets
  file of Debezium Server (tests/debezium Run.java), writing JSON lines.
"""

import json
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from conftest import wait_until
from test_debezium_oracle import _Debezium


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def connector_config(version, uri, prefix, schemas, include):
    """The connector's properties as a user of `version` writes them."""
    if version.startswith("1."):
        import re
        hostport = re.match(r"mongodb://([^/?]+)", uri).group(1)
        cfg = {"mongodb.hosts": "rs0/%s" % hostport, "mongodb.name": prefix,
               "capture.mode": "change_streams_update_full"}
    else:
        cfg = {"mongodb.connection.string": uri, "topic.prefix": prefix,
               "capture.mode": "change_streams_update_full"}
    cfg.update({"connector.class": "io.debezium.connector.mongodb.MongoDbConnector",
                "tasks.max": "1", "collection.include.list": include,
                "key.converter": "org.apache.kafka.connect.json.JsonConverter",
                "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                "key.converter.schemas.enable": str(schemas).lower(),
                "value.converter.schemas.enable": str(schemas).lower()})
    return cfg


class ConnectWorker:
    """A distributed Kafka Connect worker; start() waits for its REST API."""

    def __init__(self, java, lib, workdir, bootstrap, group, offsets_topic, schemas, n):
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.workdir = Path(workdir)
        props = self.workdir / ("worker-%d.properties" % n)
        self.worker_props = props
        props.write_text("\n".join([
            "bootstrap.servers=%s" % bootstrap,
            "group.id=%s" % group,
            "key.converter=org.apache.kafka.connect.json.JsonConverter",
            "value.converter=org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable=%s" % str(schemas).lower(),
            "value.converter.schemas.enable=%s" % str(schemas).lower(),
            "offset.storage.topic=%s" % offsets_topic,
            "offset.storage.replication.factor=1",
            "offset.storage.partitions=25",
            "config.storage.topic=%s-configs" % group,
            "config.storage.replication.factor=1",
            "status.storage.topic=%s-status" % group,
            "status.storage.replication.factor=1",
            "status.storage.partitions=1",
            "offset.flush.interval.ms=1000",
            "listeners=http://127.0.0.1:%d" % self.port,
            "rest.advertised.host.name=127.0.0.1",
            "rest.advertised.port=%d" % self.port,
            "scheduled.rebalance.max.delay.ms=0",
        ]) + "\n")
        self.log = open(self.workdir / ("connect-%d.log" % n), "wb")
        self.proc = subprocess.Popen(
            [java, "-Xmx512m", "-cp", "%s/*" % lib, "org.apache.kafka.connect.cli.ConnectDistributed",
             str(props)], stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wait_until(self._up, 120, "the Kafka Connect worker's REST API")

    def _up(self):
        if self.proc.poll() is not None:
            raise RuntimeError("Kafka Connect worker exited: %s" % self.log_text()[-3000:])
        try:
            self.get("/connectors")
            return True
        except (urllib.error.URLError, ConnectionError, OSError):
            return False

    def log_text(self):
        if not self.log.closed:
            self.log.flush()
        return (self.workdir / Path(self.log.name).name).read_text(errors="replace")

    def request(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json",
                                              "Accept": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            raw = r.read()
        return json.loads(raw) if raw else None

    def get(self, path):
        return self.request("GET", path)

    def register(self, name, config):
        """PUT /connectors/NAME/config (create or update), then wait for the task."""
        for _ in range(30):  # the worker may still be joining its group
            try:
                self.request("PUT", "/connectors/%s/config" % name, config)
                break
            except urllib.error.HTTPError as e:
                if e.code != 409:
                    raise
                time.sleep(1)
        wait_until(lambda: self.task_state(name) == "RUNNING", 120,
                   "connector %s task RUNNING" % name)

    def task_state(self, name):
        try:
            st = self.get("/connectors/%s/status" % name)
        except urllib.error.HTTPError:
            return None
        tasks = st.get("tasks") or []
        if tasks and tasks[0].get("state") == "FAILED":
            raise AssertionError("connector task FAILED: %s" % tasks[0].get("trace", "")[:3000])
        return tasks[0].get("state") if tasks else None

    def stop(self):
        """SIGTERM: the worker stops its tasks and commits their offsets."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self.log.close()


class Engine(_Debezium):
    """Debezium's embedded engine (Run.java) with a FileOffsetBackingStore file."""

    def __init__(self, java, cp, workdir, name, config, offsets_file, out, n):
        workdir = Path(workdir)
        props = workdir / ("engine-%d.properties" % n)
        lines = ["name=%s" % name,
                 "offset.storage=org.apache.kafka.connect.storage.FileOffsetBackingStore",
                 "offset.storage.file.filename=%s" % offsets_file,
                 "offset.flush.interval.ms=200"]
        for k, v in config.items():
            lines.append("%s=%s" % (k, v.replace("\\", "\\\\")))
        props.write_text("\n".join(lines) + "\n")
        super().__init__(java, cp, props, out, workdir, n, tag="engine", log_suffix="log")

    def log_text(self):
        if not self.err.closed:
            self.err.flush()
        return self.err_path.read_text(errors="replace")
