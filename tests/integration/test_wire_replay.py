"""The daemon against bench/replay_server (the wire-protocol replay server of
bench/wire_bench.py): what the server replays arrives whole and in order, and
a task streaming faster than its offsets flush keeps its memory bounded (the
in-flight tracker lets go of acknowledged records at every service, not only
when the flush timer stores a position)."""
import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import BUILD_DIR, wait_until


@pytest.fixture
def replay_server(shared_dir, tmp_workdir):
    """Factory: replay_server(*args) starts bench/replay_server with the
    accounts and theaters datasets and returns its port."""
    exe = BUILD_DIR / "bench" / "replay_server"
    if not (exe.is_file() and os.access(exe, os.X_OK)):
        pytest.fail("replay_server not found at %s: build the tree first" % exe)
    procs = []

    def start(*args):
        data = ["--data", str(shared_dir / "datasets" / "sample_analytics" / "accounts.json"),
                "--data", str(shared_dir / "datasets" / "sample_mflix" / "theaters.json")]
        p = subprocess.Popen([str(exe), "--port", "0", *data, *[str(a) for a in args]],
                             stdout=subprocess.PIPE, stderr=open(tmp_workdir / "server.log", "wb"),
                             text=True)
        procs.append(p)
        ready = p.stdout.readline().split()
        assert ready and ready[0] == "ready", "replay_server did not start"
        return int(ready[1])

    yield start
    for p in procs:
        p.terminate()
        p.wait(timeout=10)


def write_cfg(work: Path, port: int, extra: str = "") -> Path:
    cfg = work / "cfg.yaml"
    cfg.write_text('topic.prefix: replay\n'
                   'mongodb.connection.string: "mongodb://127.0.0.1:%d/?replicaSet=rs0"\n'
                   'snapshot.mode: no_data\ncursor.max.await.time.ms: 200\n'
                   'sink.type: file\nsink.path: "%s/events.jsonl"\n'
                   'offsets.file.path: "%s/offsets.json"\n%s' % (port, work, work, extra))
    return cfg


def lines(path: Path):
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


@pytest.mark.parametrize("pace", [[], ["--rate", "2000", "--tick-ms", "7"]],
                         ids=["memory-speed", "paced"])
def test_replayed_events_arrive_whole_and_in_order(replay_server, start_mongocdc, tmp_workdir, pace):
    """Paced (--rate), replies hold 14 events each (2000/s, 7 ms ticks) that
    continue the 500-event template across its end: the mix, the updates'
    documents and the unique increasing clusterTimes are those of whole
    batches."""
    port = replay_server("--events", "3000", "--batch", "500", "--collections", "0", "--docs", "0",
                         *pace)
    d = start_mongocdc("-c", write_cfg(tmp_workdir, port, "offsets.flush.interval.ms: 100\n"))
    out = tmp_workdir / "events.jsonl"
    wait_until(lambda: lines(out) >= 3300, 60, "3000 events and 300 tombstones")
    assert d.stop() == 0
    ops, ords = {}, []
    tombstones = 0
    for line in out.read_text().splitlines():
        rec = json.loads(line)
        if rec["value"] is None:
            tombstones += 1
            continue
        v = rec["value"]
        ops[v["op"]] = ops.get(v["op"], 0) + 1
        ords.append(v["source"]["ord"])
        if v["op"] == "u":
            assert v["updateDescription"] is not None and v["after"] is not None
    assert ops == {"c": 1800, "u": 900, "d": 300}
    assert tombstones == 300
    assert ords == list(range(1, 3001)), "clusterTime increments are unique and increasing"
    assert '"ord":3000,' in (tmp_workdir / "offsets.json").read_text()


def peak_rss_mib(pid: int) -> float:
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def test_memory_stays_bounded_between_offset_flushes(replay_server, start_mongocdc, tmp_workdir):
    """150,000 events (~1 KiB of in-flight tracker entry each) within one
    flush interval (the 60 s default): held until the timer, they took
    ~300 MiB; popped as they are acknowledged, the process stays near 20 MiB.
    The bound is loose (a shared machine, allocator slack)."""
    n = 150000
    port = replay_server("--events", str(n), "--collections", "0", "--docs", "0")
    d = start_mongocdc("-c", write_cfg(tmp_workdir, port))
    out = tmp_workdir / "events.jsonl"
    wait_until(lambda: lines(out) >= n + n // 10, 120, "%d records" % (n + n // 10), interval_s=0.2)
    rss = peak_rss_mib(d.proc.pid)
    assert d.stop() == 0
    assert rss < 120, "peak RSS %.0f MiB while streaming %d events within one flush interval" % (rss, n)
    # the position stored at stop is the last event's, popped long before
    stored = (tmp_workdir / "offsets.json").read_text()
    assert '"ord":%d,' % n in stored, stored
