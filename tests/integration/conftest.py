"""Shared fixtures of the integration suite.

Endpoints come from the environment, so the same tests run against the
MongoDB simulator and a local broker (the default) or against a real MongoDB
and a real Kafka (for example the compose files in docker/):

  MCDC_TEST_KAFKA   host:port of a Kafka broker, or "mock" for librdkafka's
                    in-process mock cluster. Unset: the `kafka` fixture starts
                    scripts/kafka-local.sh itself (and stops it at the end),
                    and falls back to the mock cluster, loudly, if it cannot.
  MONGO_TEST_URI    a MongoDB connection string; unset: the simulator
                    (tests/mongosim/) stands in for MongoDB.
  MCDC_BIN          the mongocdc executable under test (set by ctest).
  MCDC_BUILD_DIR, MCDC_SOURCE_DIR, MCDC_SHARED_DIR  build tree, repository,
                    shared datasets and format documents (set by ctest).
"""

import importlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kafka_support
from kafka_support import KafkaEndpoint
from pipeline_support import Sim, dataset_loads, wait_until  # noqa: F401 (wait_until: re-exported)

SOURCE_DIR = Path(os.environ.get("MCDC_SOURCE_DIR") or Path(__file__).resolve().parents[2])
BUILD_DIR = Path(os.environ.get("MCDC_BUILD_DIR") or SOURCE_DIR / "build")
MONGOSIM_DIR = SOURCE_DIR / "tests" / "mongosim"

_kafka_used = []  # descriptions of the Kafka clusters this run used


def _say(config, line):
    """Prints a line on the terminal even while pytest captures output."""
    tr = config.pluginmanager.getplugin("terminalreporter")
    capman = config.pluginmanager.getplugin("capturemanager")
    if tr is None or capman is None:
        print(line, file=sys.__stderr__, flush=True)
        return
    with capman.global_and_fixture_disabled():
        tr.write_line(line, bold=True)


def pytest_report_header(config):
    k = os.environ.get("MCDC_TEST_KAFKA")
    m = os.environ.get("MONGO_TEST_URI")
    return ["mongocdc: MCDC_TEST_KAFKA=%s, MONGO_TEST_URI=%s, MCDC_BIN=%s"
            % (k or "(unset: local broker, else mock)", m or "(unset: simulator)",
               os.environ.get("MCDC_BIN", "(unset)"))]


def pytest_terminal_summary(terminalreporter):
    for line in _kafka_used:
        terminalreporter.write_line(line, bold=True)


# ---------------------------------------------------------------- Kafka


@pytest.fixture(scope="session")
def kafka(request) -> KafkaEndpoint:
    """The Kafka cluster of this run (see the module comment for how it is
    chosen). Session-scoped: tests isolate themselves with unique topics."""
    want = os.environ.get("MCDC_TEST_KAFKA", "").strip()
    if want == "mock":
        ep = kafka_support.mock_cluster()
    elif want:
        ep = KafkaEndpoint(want, "real", "MCDC_TEST_KAFKA")
    else:
        try:
            ep = kafka_support.start_local_broker(str(BUILD_DIR))
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
            _say(request.config, "NO REAL KAFKA: %s" % e)
            ep = kafka_support.mock_cluster()
            ep.origin = "fallback: no local broker could be started"
    desc = ep.describe()
    _kafka_used.append(desc)
    _say(request.config, "\n" + desc)
    yield ep
    ep.close()


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "broker_outage: the test stops, freezes or restarts the shared broker itself "
        "(it takes kafka_support.broker_outage_lock exclusively; the suite does not hold it "
        "shared around the test)")


@pytest.fixture(autouse=True)
def _broker_answering(request):
    """Every test that uses the real broker holds it shared, so a test of
    another pytest process that stops or freezes it (marked broker_outage, or
    using test_faults' broker_pause_lock) waits until none of them runs, and
    they wait for it (kafka_support.broker_outage_lock)."""
    names = request.fixturenames
    if ("kafka" not in names or request.node.get_closest_marker("broker_outage") is not None
            or "broker_pause_lock" in names):
        yield
        return
    ep = request.getfixturevalue("kafka")
    if ep.is_mock:
        yield
        return
    with kafka_support.broker_outage_lock(ep.bootstrap, exclusive=False):
        yield


@pytest.fixture
def kafka_topic(kafka) -> str:
    """A new, empty topic unique to the test: one partition on a real broker,
    the mock cluster's default count (4) on the mock (see create_topic)."""
    return kafka_support.create_topic(kafka, kafka_support.unique_topic())


# ---------------------------------------------------------------- MongoDB


@pytest.fixture(scope="session")
def mongo_test_uri():
    """MONGO_TEST_URI when the suite runs against a real MongoDB, else None
    (tests then use the simulator)."""
    return os.environ.get("MONGO_TEST_URI") or None


def import_mongosim():
    """The simulator module tests/mongosim/mongosim.py (its `MongoSim` class
    starts a simulated deployment; see mongo-sim-spec.md). Skips the calling
    test, with the reason, when the module is not in the tree; any other
    import error fails the test."""
    if not (MONGOSIM_DIR / "mongosim.py").is_file():
        pytest.skip("MongoDB simulator not in this tree (tests/mongosim/mongosim.py is absent)")
    if str(MONGOSIM_DIR) not in sys.path:
        sys.path.insert(0, str(MONGOSIM_DIR))
    return importlib.import_module("mongosim")


@pytest.fixture(scope="session")
def mongosim_module():
    return import_mongosim()


def start_sharded_sim(shards=2, members=1, noop_interval=0.3):
    """A started sharded simulator (mongosim.MongoSim: config server, shards of
    members each, mongos) whose primaries write a no-op every noop_interval
    seconds. The caller stops it."""
    sim = import_mongosim().MongoSim(topology="sharded", shards=shards, members=members,
                                     noop_interval=noop_interval)
    sim.start()
    return sim


@pytest.fixture
def users_sim(tmp_workdir, shared_dir):
    """A three-member replica-set simulator (pipeline_support.Sim) holding the
    shared dataset sample_mflix.users; stopped when the test ends."""
    sim = Sim(tmp_workdir, dataset_loads(shared_dir, only={"sample_mflix.users"}))
    yield sim
    sim.stop()


# ---------------------------------------------------------------- mongocdc


@pytest.fixture(scope="session")
def mongocdc_bin() -> Path:
    """Path of the mongocdc executable under test: MCDC_BIN (set by ctest),
    else <build dir>/mongocdc. Fails (not skips) when it is not built."""
    p = Path(os.environ.get("MCDC_BIN") or BUILD_DIR / "mongocdc")
    if not (p.is_file() and os.access(p, os.X_OK)):
        pytest.fail("mongocdc executable not found at %s: build the tree first (set MCDC_BIN)" % p)
    return p


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The shared folder with datasets and the format documents
    (MCDC_SHARED_DIR, default ../shared next to the repository)."""
    p = Path(os.environ.get("MCDC_SHARED_DIR") or SOURCE_DIR.parent / "shared").resolve()
    if not (p / "datasets").is_dir():
        pytest.skip("shared datasets not found at %s (set MCDC_SHARED_DIR)" % p)
    return p


@pytest.fixture
def tmp_workdir(tmp_path) -> Path:
    """An empty folder for one test's configs, offsets and logs. pytest keeps
    the last few runs' folders, so a failure can be inspected afterwards."""
    d = tmp_path / "work"
    d.mkdir()
    return d


class Daemon:
    """A mongocdc process started by a test. Output goes to files in the
    test's work folder; stop() sends SIGTERM and waits (bounded), and the
    fixture kills whatever is left at the end of the test."""

    def __init__(self, argv, workdir: Path, env=None):
        self.stdout_path = workdir / "mongocdc.stdout"
        self.stderr_path = workdir / "mongocdc.stderr"
        self._out = open(self.stdout_path, "wb")
        self._err = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen([str(a) for a in argv], cwd=workdir, stdin=subprocess.DEVNULL,
                                     stdout=self._out, stderr=self._err,
                                     env={**os.environ, **(env or {})})

    def running(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout_s: float = 30) -> int:
        """SIGTERM, then wait up to timeout_s seconds; returns the exit status
        (negative: killed by that signal). Raises TimeoutError if it hangs."""
        if self.proc.poll() is None:
            self._await_handlers()
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise TimeoutError("mongocdc did not exit within %.0fs of SIGTERM" % timeout_s)
        finally:
            self._out.close()
            self._err.close()

    def _await_handlers(self, limit_s: float = 10) -> None:
        """Waits (up to limit_s) until the process handles SIGTERM: caught or
        blocked for the event loop, from /proc/PID/status. A SIGTERM sent
        while the program is still being loaded, before its main() runs,
        takes the default action (killed, -15): no program can stop cleanly
        then, and it is not what these tests check."""
        bit = 1 << (signal.SIGTERM - 1)
        end = time.monotonic() + limit_s
        while time.monotonic() < end and self.proc.poll() is None:
            try:
                status = Path("/proc/%d/status" % self.proc.pid).read_text()
            except OSError:
                return
            masks = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            if any(int(masks.get(k, "0").strip(), 16) & bit for k in ("SigCgt", "SigBlk")):
                return
            time.sleep(0.005)

    def stderr(self) -> str:
        self._err.flush()
        return self.stderr_path.read_text(errors="replace")

    def stdout(self) -> bytes:
        self._out.flush()
        return self.stdout_path.read_bytes()


@pytest.fixture
def start_mongocdc(mongocdc_bin, tmp_workdir):
    """Factory: start_mongocdc(*args, env=None) starts mongocdc with args in
    the test's work folder and returns a Daemon; every daemon still running
    when the test ends is killed."""
    started = []

    def start(*args, env=None):
        d = Daemon([mongocdc_bin, *args], tmp_workdir, env)
        started.append(d)
        return d

    yield start
    for d in started:
        if d.running():
            d.proc.kill()
            d.proc.wait(timeout=10)
        d._out.close()
        d._err.close()


@pytest.fixture
def run_mongocdc(mongocdc_bin, tmp_workdir):
    """run_mongocdc(*args, timeout_s=60, env=None): runs mongocdc to completion
    in the test's work folder; returns subprocess.CompletedProcess with bytes
    stdout and stderr. Raises subprocess.TimeoutExpired if it does not end."""

    def run(*args, timeout_s: float = 60, env=None):
        return subprocess.run([str(mongocdc_bin), *[str(a) for a in args]], cwd=tmp_workdir,
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=timeout_s,
                              env={**os.environ, **(env or {})})

    return run


@pytest.fixture
def wait_until_fn():
    """The wait_until() helper (pipeline_support), for tests that prefer a fixture."""
    return wait_until
