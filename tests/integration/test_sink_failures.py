"""The JSON-lines sink when its writes fail, on the simulator:

  - sink.type stdout whose reader has gone (EPIPE): the daemon stops at once,
    exit 1, with an error that says so, instead of restarting for ever;
  - a device that is always full (/dev/full): restarts are counted against
    connect.max.attempts with backoff (the count is not reset by the redone
    snapshot), then exit 1;
  - a real full file system (a small tmpfs, mounted when the tests run as
    root, skipped otherwise): the file holds whole lines only, and after more
    room the restarted daemon completes it without a torn record.
"""

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from conftest import wait_until
from pipeline_support import Sim, fast_retry, log_text, read_jsonl, write_config

N_DOCS = 400


def _dataset(workdir):
    path = Path(workdir) / "items.json"
    with open(path, "w") as fh:
        for i in range(N_DOCS):
            fh.write(json.dumps({"_id": i, "pad": "x" * 200, "n": i}) + "\n")
    return path


@pytest.fixture
def items_sim(tmp_workdir):
    sim = Sim(tmp_workdir, [(str(_dataset(tmp_workdir)), "itdb.items")])
    yield sim
    sim.stop()


def test_stdout_reader_gone_is_final(tmp_workdir, items_sim, mongocdc_bin):
    cfg = write_config(tmp_workdir, items_sim.uri, **fast_retry(**{"sink.type": "stdout"}))
    err_path = Path(tmp_workdir) / "stderr.log"
    with open(err_path, "wb") as err:
        proc = subprocess.Popen([str(mongocdc_bin), "-c", str(cfg)], cwd=tmp_workdir,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err)
        try:
            first = proc.stdout.readline()  # what `| head -1` does
            assert first.startswith(b"{"), first
            proc.stdout.close()
            items_sim.client().itdb.items.insert_one({"_id": "after-close"})
            rc = proc.wait(timeout=90)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
    text = err_path.read_text(errors="replace")
    assert rc == 1, text[-3000:]
    assert "closed the pipe" in text, text[-3000:]
    assert len(re.findall(r"initial snapshot starting", text)) == 1, text[-3000:]
    assert "restarting capture" not in text, text[-3000:]


def test_always_full_device_counts_attempts_then_stops(tmp_workdir, items_sim, run_mongocdc):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    cfg = write_config(tmp_workdir, items_sim.uri, sink_path="/dev/full",
                       **fast_retry(**{"connect.max.attempts": 4}))
    r = run_mongocdc("-c", cfg, timeout_s=120)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1, err[-3000:]
    # a retry with nothing in flight says nothing about unacknowledged records
    assert not re.search(r"\b0 records still unacknowledged", err), err[-3000:]
    attempts = [int(x) for x in re.findall(r"\(attempt (\d+) of 4\); restarting", err)]
    assert attempts == [1, 2, 3], err[-5000:]
    delays = [int(x) for x in re.findall(r"of 4\); restarting from the last committed offsets "
                                         r"in (\d+) ms", err)]
    assert delays == [100, 200, 400], delays
    assert re.search(r"could not be delivered 4 times in a row", err), err[-3000:]
    assert "No space left on device" in err, err[-3000:]


@pytest.fixture
def small_fs(tmp_path):
    mnt = tmp_path / "smallfs"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(mnt)],
                       capture_output=True)
    if r.returncode != 0:
        pytest.skip("cannot mount a tmpfs here: %s" % r.stderr.decode(errors="replace"))
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _lines_whole(path):
    data = path.read_bytes()
    assert data == b"" or data.endswith(b"\n"), "partial line at the end: %r" % data[-80:]
    for line in data.splitlines():
        json.loads(line)  # every line a whole record
    return data.count(b"\n")


def test_full_file_system_leaves_whole_lines_and_resumes(tmp_workdir, items_sim, small_fs,
                                                         run_mongocdc, start_mongocdc):
    out = small_fs / "events.jsonl"
    cfg = write_config(tmp_workdir, items_sim.uri, sink_path=str(out),
                       **fast_retry(**{"connect.max.attempts": 3}))
    r = run_mongocdc("-c", cfg, timeout_s=120)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1, err[-3000:]
    assert "No space left on device" in err, err[-3000:]
    assert re.search(r"could not be delivered 3 times in a row", err), err[-3000:]
    n_first = _lines_whole(out)
    assert 0 < n_first < N_DOCS, n_first

    # Room again: the restarted daemon appends to whole lines only.
    subprocess.run(["mount", "-o", "remount,size=8m", str(small_fs)], check=True)
    d = start_mongocdc("-c", cfg)
    def done():
        if not d.running():
            raise AssertionError("mongocdc exited: " + log_text(tmp_workdir)[-3000:])
        return "streaming changes from" in log_text(tmp_workdir)
    wait_until(done, 90, "the snapshot to complete")
    _lines_whole(out)
    recs = read_jsonl(out)
    ids = {json.loads(r.key)["id"] for r in recs if r.key is not None and r.value is not None}
    assert {str(i) for i in range(N_DOCS)} <= ids, sorted(ids)[:10]

