"""Shared fixtures of the simulator's conformance suite.

Every test drives the simulator only through real clients (pymongo 3.11, libmongoc 1.23 via
the probe in c/) and names, in its docstring, the MongoDB document or spec section it checks
(mongo-sim-spec.md lives in the repository's shared docs)."""

import faulthandler
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SIM_DIR = os.path.dirname(HERE)
if SIM_DIR not in sys.path:
    sys.path.insert(0, SIM_DIR)

from mongosim import MongoSim  # noqa: E402

SHARED = os.environ.get("MCDC_SHARED_DIR") or os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(SIM_DIR))), "shared")
DATASETS = os.path.join(SHARED, "datasets")


def dataset(rel):
    p = os.path.join(DATASETS, rel)
    if not os.path.exists(p):
        pytest.skip("dataset %s not available (set MCDC_SHARED_DIR)" % rel)
    return p


@pytest.fixture(scope="session")
def probe():
    """The libmongoc probe (c/mongoc_probe.c), built with pkg-config into a temp dir."""
    if shutil.which("cc") is None or shutil.which("pkg-config") is None:
        pytest.skip("no C compiler or pkg-config")
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libmongoc-1.0"], capture_output=True,
                           text=True, timeout=30)
    if flags.returncode != 0:
        pytest.skip("libmongoc-1.0 not found by pkg-config")
    d = tempfile.mkdtemp(prefix="mongoc-probe-")
    exe = os.path.join(d, "mongoc_probe")
    r = subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-o", exe,
                        os.path.join(HERE, "c", "mongoc_probe.c")] + flags.stdout.split(),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    yield exe
    shutil.rmtree(d, ignore_errors=True)


def run_probe(exe, *args, timeout=30):
    r = subprocess.run([exe] + [str(a) for a in args], capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout.splitlines(), r.stderr


def wait_for(pred, timeout=10.0, step=0.05):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(step)
    raise AssertionError("condition not met within %.1fs" % timeout)


# One test's bound: the slowest takes about 4 s alone and about 15 s on two loaded
# cores. A test still running after this long is hung (a change stream next() with no
# event, a client waiting on a dead socket): every thread's stack is printed, the
# simulators it started are killed (they would keep ctest's output pipe open) and the run
# ends with status 1, so the log says where instead of ctest killing a silent suite at its
# TIMEOUT.
TEST_WATCHDOG_S = float(os.environ.get("MONGOSIM_TEST_WATCHDOG_S", "120"))
_watchdog_err = None


def pytest_configure(config):
    # pytest captures fd 2 around each test; keep a copy of the real one for the dump.
    global _watchdog_err
    _watchdog_err = open(os.dup(sys.stderr.fileno()), "w")


def _children():
    me = str(os.getpid())
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as fh:
                if fh.read().rsplit(")", 1)[1].split()[1] == me:
                    yield int(pid)
        except (OSError, IndexError):
            continue


def _watchdog_fire(name):
    err = _watchdog_err or sys.__stderr__
    err.write("\n%s still running after %.0f s: hung; stacks of every thread:\n" % (name, TEST_WATCHDOG_S))
    err.flush()
    faulthandler.dump_traceback(file=err, all_threads=True)
    for pid in _children():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    err.flush()
    os._exit(1)


@pytest.fixture(autouse=True)
def _watchdog(request):
    t = threading.Timer(TEST_WATCHDOG_S, _watchdog_fire, args=(request.node.nodeid,))
    t.daemon = True
    t.start()
    yield
    t.cancel()


@pytest.fixture
def sim():
    with MongoSim(topology="replset", members=3, noop_interval=1.0) as s:
        yield s


@pytest.fixture(scope="module")
def shared_sim():
    with MongoSim(topology="replset", members=3, noop_interval=1.0) as s:
        yield s
