"""Failures that repeat for ever must count against connect.max.attempts (with
backoff) and end in exit 1 with a clear error, not loop at "attempt 1":

  - a snapshot read that fails every time (an error classified as transient):
    each failure redoes the whole snapshot;
  - history lost right after every new snapshot (the oplog keeps less time
    than a snapshot takes): each time the whole collection is copied again.
"""

import json
import re
from pathlib import Path

import pytest

from pipeline_support import Sim, fast_retry, write_config

N_DOCS = 200


@pytest.fixture
def items_sim(tmp_workdir):
    path = Path(tmp_workdir) / "items.json"
    with open(path, "w") as fh:
        for i in range(N_DOCS):
            fh.write(json.dumps({"_id": i, "n": i}) + "\n")
    sim = Sim(tmp_workdir, [(str(path), "itdb.items")])
    yield sim
    sim.stop()


def test_snapshot_read_failing_every_time_is_counted(tmp_workdir, items_sim, run_mongocdc):
    """A find that fails every time with an error classified as transient: each failure redoes
    the whole snapshot, so the failures count against connect.max.attempts (with backoff)
    and the daemon stops, instead of redoing it for ever at "attempt 1"."""
    items_sim.control("fail", commands=["find"], code=12345, errmsg="injected read failure",
                      times=100000)
    cfg = write_config(tmp_workdir, items_sim.uri, **fast_retry(**{"connect.max.attempts": 4}))
    r = run_mongocdc("-c", cfg, timeout_s=120)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1, err[-3000:]
    attempts = [int(x) for x in re.findall(r"injected read failure.*\(attempt (\d+) of 4\)", err)]
    assert attempts == [1, 2, 3], err[-3000:]
    assert "after 4 failed attempts" in err, err[-3000:]


def test_history_lost_after_every_snapshot_stops(tmp_workdir, items_sim, run_mongocdc):
    """Every change stream the task opens fails with 286 ChangeStreamHistoryLost: with
    snapshot.mode when_needed each one means a new snapshot; after connect.max.attempts of
    them in a row, nothing streamed between, the task stops and says why."""
    items_sim.control("fail", commands=["aggregate"], code=286, codeName="ChangeStreamHistoryLost",
                      errmsg="Resume of change stream was not possible, as the resume point may "
                             "no longer be in the oplog.", times=100000)
    cfg = write_config(tmp_workdir, items_sim.uri,
                       **fast_retry(**{"connect.max.attempts": 3, "snapshot.mode": "when_needed"}))
    r = run_mongocdc("-c", cfg, timeout_s=120)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1, err[-3000:]
    assert re.search(r"history lost on rs0 3 times in a row, each time right after a new "
                     r"snapshot: the oplog keeps less time than a snapshot takes", err), err[-3000:]
    assert len(re.findall(r"a new snapshot is taken", err)) == 2, err[-3000:]
