"""Kafka for the integration tests: which broker, unique topics, exact reads.

A test sees Kafka only through `KafkaEndpoint` (a bootstrap address plus how it
was obtained) and the helpers below, so the same test runs against:

  * a real broker given by MCDC_TEST_KAFKA=host:port (scripts/kafka-local.sh,
    the compose files in docker/, or any other cluster);
  * librdkafka's in-process mock cluster, MCDC_TEST_KAFKA=mock, for machines
    without Java. The cluster is created by an "owner" producer configured with
    `test.mock.num.brokers` (librdkafka CONFIGURATION.md, available since
    librdkafka 1.3, so in 2.0.2) and lives as long as that producer; its
    brokers listen on 127.0.0.1, so other clients, including the mongocdc
    daemon run as a subprocess, connect to it by address like to any broker.

Messages are returned with their key and value as the exact bytes stored in
Kafka: the key bytes decide the partition and log compaction, so tests compare
bytes, never re-serialised JSON.
"""

import contextlib
import fcntl
import os
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KAFKA_LOCAL = os.path.join(REPO, "scripts", "kafka-local.sh")


@dataclass
class Record:
    """One Kafka message as stored: exact key and value bytes (None for a
    null key or a tombstone's null value), partition, offset, headers."""

    topic: str
    partition: int
    offset: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: List[Tuple[str, bytes]] = field(default_factory=list)
    timestamp_ms: int = -1


class KafkaEndpoint:
    """A Kafka cluster the tests may use. `mode` is "real" or "mock";
    `bootstrap` is a host:port list; `origin` says where it came from."""

    def __init__(self, bootstrap: str, mode: str, origin: str, owner=None, stop=None):
        self.bootstrap = bootstrap
        self.mode = mode
        self.origin = origin
        self._owner = owner  # keeps a mock cluster alive
        self._stop = stop  # callable that stops a broker started for us

    @property
    def is_mock(self) -> bool:
        return self.mode == "mock"

    def describe(self) -> str:
        if self.is_mock:
            return ("KAFKA: librdkafka MOCK cluster (test.mock.num.brokers, librdkafka %s) at %s "
                    "-- NOT a real broker (%s)" % (confluent_kafka.libversion()[0], self.bootstrap,
                                                  self.origin))
        return "KAFKA: real broker at %s (%s)" % (self.bootstrap, self.origin)

    def config(self, **extra) -> Dict[str, object]:
        """A librdkafka client configuration for this cluster plus `extra`
        (keys with '_' are written with '.', e.g. group_id -> group.id)."""
        conf = {"bootstrap.servers": self.bootstrap}
        for k, v in extra.items():
            conf[k.replace("_", ".")] = v
        return conf

    def close(self):
        if self._owner is not None:
            self._owner.flush(5)
            self._owner = None
        if self._stop is not None:
            stop, self._stop = self._stop, None
            stop()


def mock_cluster(num_brokers: int = 1) -> KafkaEndpoint:
    """Creates a librdkafka mock cluster inside this process and returns its
    endpoint. The mock auto-creates topics on first use (librdkafka's default
    for mock topics is 4 partitions); use create_topic() for a fixed count."""
    owner = Producer({"test.mock.num.brokers": num_brokers, "log_level": 3})
    md = owner.list_topics(timeout=10)
    if not md.brokers:
        raise RuntimeError("librdkafka mock cluster reported no brokers")
    bootstrap = ",".join("%s:%d" % (b.host, b.port) for b in md.brokers.values())
    return KafkaEndpoint(bootstrap, "mock", "MCDC_TEST_KAFKA=mock", owner=owner)


def start_local_broker(build_dir: Optional[str], timeout_s: int = 240) -> KafkaEndpoint:
    """Starts scripts/kafka-local.sh (or finds it already running) and returns
    its endpoint; the broker is stopped by close() only if this call started
    it. Raises RuntimeError with the script's last lines when it cannot."""
    env = dict(os.environ)
    if build_dir and "KAFKA_LOCAL_DIR" not in env:
        env["KAFKA_LOCAL_DIR"] = os.path.join(build_dir, "kafka-local")
    was_running = subprocess.run([KAFKA_LOCAL, "status"], env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, timeout=30).returncode == 0
    p = subprocess.run([KAFKA_LOCAL, "start"], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=timeout_s)
    out = p.stdout.decode(errors="replace").strip().splitlines()
    if p.returncode != 0 or not out:
        raise RuntimeError("scripts/kafka-local.sh start failed: " + " | ".join(out[-3:]))

    def stop():
        subprocess.run([KAFKA_LOCAL, "stop"], env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=60)

    origin = "scripts/kafka-local.sh, " + ("already running" if was_running else "started for this run")
    return KafkaEndpoint(out[-1], "real", origin, stop=None if was_running else stop)


def unique_topic(prefix: str = "mcdc-test") -> str:
    """A topic name no other test or earlier run uses."""
    return "%s-%s" % (prefix, uuid.uuid4().hex[:12])


def create_topic(kafka: KafkaEndpoint, name: str, partitions: int = 1,
                 config: Optional[Dict[str, str]] = None, timeout_s: float = 30) -> str:
    """Creates `name` with `partitions` partitions (replication factor 1) and
    waits until its metadata shows leaders for every partition. Returns name.

    librdkafka 2.0.2's mock cluster has no CreateTopics handler: there the
    topic is auto-created by a metadata request instead, with the mock's
    default partition count (4) whatever `partitions` asks; partition_count()
    tells a test what it got."""
    admin = AdminClient(kafka.config())
    if kafka.is_mock:
        Producer(kafka.config()).list_topics(name, timeout=10)
        partitions = None
    else:
        fut = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1,
                                            config=config or {})],
                                  operation_timeout=timeout_s, request_timeout=timeout_s)
        try:
            fut[name].result(timeout=timeout_s)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
    deadline = time.monotonic() + timeout_s
    while True:
        md = admin.list_topics(name, timeout=10).topics.get(name)
        if (md is not None and md.error is None and md.partitions
                and (partitions is None or len(md.partitions) == partitions)
                and all(p.leader >= 0 for p in md.partitions.values())):
            return name
        if time.monotonic() > deadline:
            raise TimeoutError("topic %s has no leaders after %.0fs" % (name, timeout_s))
        time.sleep(0.2)


def partition_count(kafka: KafkaEndpoint, topic: str) -> int:
    """Number of partitions of an existing topic (0 if it does not exist)."""
    md = AdminClient(kafka.config()).list_topics(topic, timeout=10).topics.get(topic)
    return 0 if md is None or md.error is not None else len(md.partitions)


def produce(kafka: KafkaEndpoint, topic: str, messages, timeout_s: float = 30,
            partition: Optional[int] = None, **conf) -> int:
    """Produces (key, value) pairs of bytes (None allowed) to `topic`, to
    `partition` if given (else partitioned by key), and waits for every
    delivery report. Returns the number delivered; raises on any delivery
    error."""
    errors = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)

    p = Producer(kafka.config(**{"enable.idempotence": True, "acks": "all", **conf}))
    n = 0
    for key, value in messages:
        if partition is None:
            p.produce(topic, key=key, value=value, on_delivery=on_delivery)
        else:
            p.produce(topic, key=key, value=value, partition=partition, on_delivery=on_delivery)
        p.poll(0)
        n += 1
    left = p.flush(timeout_s)
    if left:
        raise TimeoutError("%d messages to %s not delivered within %.0fs" % (left, topic, timeout_s))
    if errors:
        raise KafkaException(errors[0])
    return n


def consume_all(kafka: KafkaEndpoint, topic: str, min_count: int = 0,
                timeout_s: float = 30) -> List[Record]:
    """Reads every message of `topic`, from the beginning of each partition to
    its end, and returns them ordered by (partition, offset).

    With min_count > 0, reads again until the topic holds at least that many
    messages or timeout_s seconds pass: use it for output that a daemon is
    still writing. Raises TimeoutError if the topic does not exist or never
    reaches min_count, so a test cannot pass on an empty read by accident.
    Reads with isolation.level=read_committed, so aborted transactional
    writes are not returned and transaction markers are skipped (Kafka's
    documented consumer semantics)."""
    deadline = time.monotonic() + timeout_s
    c = Consumer(kafka.config(**{"group.id": "mcdc-test-" + uuid.uuid4().hex[:8],
                                 "enable.auto.commit": False,
                                 "enable.partition.eof": True,
                                 "isolation.level": "read_committed",
                                 "auto.offset.reset": "earliest"}))
    try:
        parts = _partitions(c, topic, deadline)
        while True:
            out = _read_to_end(c, topic, parts, deadline)
            if len(out) >= min_count:
                return out
            if time.monotonic() > deadline:
                raise TimeoutError("topic %s holds %d messages, expected at least %d after %.0fs"
                                   % (topic, len(out), min_count, timeout_s))
            time.sleep(0.25)
    finally:
        c.close()


def _read_to_end(c: Consumer, topic: str, parts: List[int], deadline: float) -> List[Record]:
    """One pass over `parts` from their first offset to the end seen when the
    pass started (a partition is done at its EOF event or at that offset)."""
    ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in parts}
    todo = {p: hi for p, (lo, hi) in ends.items() if hi > lo}
    if not todo:
        return []
    c.assign([TopicPartition(topic, p, ends[p][0]) for p in todo])
    out: List[Record] = []
    while todo:
        if time.monotonic() > deadline:
            raise TimeoutError("reading %s: partitions %s not read to their end"
                               % (topic, sorted(todo)))
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                todo.pop(m.partition(), None)
                continue
            raise KafkaException(m.error())
        if m.partition() not in todo:
            continue
        if m.offset() < todo[m.partition()]:
            _ts_type, ts = m.timestamp()
            out.append(Record(m.topic(), m.partition(), m.offset(), m.key(), m.value(),
                              list(m.headers() or []), ts))
        if m.offset() + 1 >= todo[m.partition()]:
            todo.pop(m.partition(), None)
    c.unassign()
    out.sort(key=lambda r: (r.partition, r.offset))
    return out


def _partitions(c: Consumer, topic: str, deadline: float) -> List[int]:
    while True:
        md = c.list_topics(topic, timeout=10).topics.get(topic)
        if md is not None and md.error is None and md.partitions:
            return sorted(md.partitions)
        if time.monotonic() > deadline:
            err = md.error if md is not None else "no metadata"
            raise TimeoutError("topic %s not found: %s" % (topic, err))
        time.sleep(0.25)


_held_shared = {}  # lock file path -> [fd, depth]: this process's shared holds


@contextlib.contextmanager
def broker_outage_lock(bootstrap, exclusive):
    """Orders the tests that stop or freeze the shared broker (SIGSTOP, a
    restart) against the tests of other pytest processes that need it
    answering the whole time (the integration suite runs as several ctest
    processes at once; a Kafka Connect worker gives up after 60 s without
    metadata).

    exclusive=True: held by a test that pauses or restarts the broker at
    `bootstrap`; exclusive=False: held by a test that uses it. One lock file
    per broker address in the temporary directory, flock(2): released when the
    holder exits, also on a crash. A second file is a turnstile: a test
    waiting for the exclusive hold holds it, so the shared holds of the other
    processes' next tests queue behind it instead of starving it. Shared
    holds nest within one process (one flock, counted)."""
    base = "mongocdc-broker-%s" % bootstrap.replace(":", "_").replace("/", "_")
    path = os.path.join(tempfile.gettempdir(), base + ".lock")
    turn_path = os.path.join(tempfile.gettempdir(), base + ".turn")
    if exclusive and path in _held_shared:
        raise RuntimeError("a test holding the broker shared cannot take it exclusively: mark it "
                           "broker_outage (conftest.py)")
    if not exclusive and path in _held_shared:
        _held_shared[path][1] += 1
        try:
            yield
        finally:
            _held_shared[path][1] -= 1
        return
    turn = os.open(turn_path, os.O_RDWR | os.O_CREAT, 0o666)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        if exclusive:
            fcntl.flock(turn, fcntl.LOCK_EX)
            fcntl.flock(fd, fcntl.LOCK_EX)
            fcntl.flock(turn, fcntl.LOCK_UN)
        else:
            fcntl.flock(turn, fcntl.LOCK_SH)
            fcntl.flock(turn, fcntl.LOCK_UN)
            fcntl.flock(fd, fcntl.LOCK_SH)
            _held_shared[path] = [fd, 1]
        yield
    finally:
        if not exclusive:
            del _held_shared[path]
        os.close(fd)
        os.close(turn)
