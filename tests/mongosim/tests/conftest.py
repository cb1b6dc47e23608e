"""Shared fixtures of the simulator's conformance suite.

Every test drives the simulator only through real clients (pymongo 3.11, libmongoc 1.23 via
the probe in c/) and names, in its docstring, the MongoDB document or spec section it checks
(mongo-sim-spec.md lives in the repository's shared docs)."""

import os
import shutil
import subprocess
import sys
import tempfile
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


@pytest.fixture
def sim():
    with MongoSim(topology="replset", members=3, noop_interval=1.0) as s:
        yield s


@pytest.fixture(scope="module")
def shared_sim():
    with MongoSim(topology="replset", members=3, noop_interval=1.0) as s:
        yield s
