"""The metrics listener: /metrics scraped during a snapshot and while
streaming (values move, promtool accepts the exposition), /ready turning
not-ready when the stream stalls and back, and the oplog headroom WARN."""
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from conftest import wait_until
from pipeline_support import Sim, log_text, write_config

PROMTOOL = shutil.which("promtool")


def metrics_port(workdir, d):
    def found():
        if not d.running():
            raise AssertionError("mongocdc exited: " + log_text(workdir)[-3000:])
        m = re.search(r"metrics: listening on 127\.0\.0\.1 port (\d+)", log_text(workdir))
        return m and int(m.group(1))
    return wait_until(found, 30, "the metrics listener")


def get(port, path):
    """(status, body) of GET path; 503 is a normal answer of the probes."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def samples(body):
    """{'name{labels}': value} of an exposition."""
    out = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def promtool_ok(body):
    if PROMTOOL is None:
        pytest.fail("promtool not installed (Debian package prometheus; scripts/install-deps.sh)")
    r = subprocess.run([PROMTOOL, "check", "metrics"], input=body.encode(), capture_output=True,
                       timeout=30)
    assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()


def test_metrics_during_snapshot_and_streaming(tmp_workdir, users_sim, kafka, start_mongocdc):
    import kafka_support
    sim = users_sim
    sim.control("delay", command="getMore", ms=250)  # a snapshot slow enough to watch
    # Kafka, so that acknowledgements and their latency are real.
    cfg = write_config(tmp_workdir, sim.uri, kafka={"bootstrap.servers": kafka.bootstrap},
                       **{"topic.prefix": kafka_support.unique_topic().replace("-", "_"),
                          "metrics.enabled": True, "metrics.http.port": 0,
                          "snapshot.fetch.size": 10, "oplog.headroom.check.interval.ms": 200})
    d = start_mongocdc("-c", cfg)
    port = metrics_port(tmp_workdir, d)
    rs = None

    def mid_snapshot():
        st, body = get(port, "/metrics")
        s = samples(body)
        for k, v in s.items():
            m = re.match(r'mongocdc_task_state\{task="([^"]+)",state="snapshotting"\}', k)
            if m and v == 1:
                done = s.get('mongocdc_snapshot_documents_done{task="%s"}' % m.group(1), 0)
                if 0 < done < 185:
                    return m.group(1), body, s
        return None
    rs, body, s = wait_until(mid_snapshot, 60, "a scrape in the middle of the snapshot")
    promtool_ok(body)
    t = 'task="%s"' % rs
    assert s["mongocdc_snapshot_collections_planned{%s}" % t] == 1
    assert s["mongocdc_snapshot_documents_remaining{%s}" % t] > 0
    rows = s['mongocdc_snapshot_collection_rows_total{%s,collection="sample_mflix.users"}' % t]
    assert 0 < rows < 185
    assert get(port, "/ready")[0] == 200
    assert get(port, "/health")[0] == 200
    sim.control("delay", command="getMore", ms=0)

    def streaming():
        s = samples(get(port, "/metrics")[1])
        return s.get('mongocdc_task_state{%s,state="streaming"}' % t) == 1 and s
    s0 = wait_until(streaming, 60, "streaming")
    assert s0['mongocdc_events_seen_total{%s,op="r"}' % t] == 185
    assert s0["mongocdc_snapshot_documents_done{%s}" % t] == 185
    c = sim.client()
    for i in range(20):
        c.itdb.m.insert_one({"_id": i})
    c.itdb.m.update_one({"_id": 1}, {"$set": {"x": 1}})
    c.itdb.m.delete_one({"_id": 2})

    def moved():
        s = samples(get(port, "/metrics")[1])
        return s.get('mongocdc_events_emitted_total{%s,op="d"}' % t) == 1 and \
            s["mongocdc_records_acknowledged_total{%s}" % t] >= 185 + 22 and s
    s1 = wait_until(moved, 30, "the streamed changes in the counters")
    assert s1['mongocdc_events_seen_total{%s,op="c"}' % t] == 20
    assert s1['mongocdc_events_seen_total{%s,op="u"}' % t] == 1
    assert s1["mongocdc_records_failed_total{%s}" % t] == 0
    per = 'mongocdc_collection_events_total{%s,collection="%s",op="%s"}'
    assert s1[per % (t, "itdb.m", "c")] == 20
    assert s1[per % (t, "itdb.m", "u")] == 1
    assert s1[per % (t, "itdb.m", "d")] == 1
    assert s1[per % (t, "sample_mflix.users", "r")] == 185
    assert s1[per % (t, "sample_mflix.users", "c")] == 0
    assert s1['mongocdc_snapshot_collection_rows_total{%s,collection="sample_mflix.users"}' % t] == 185
    assert s1['mongocdc_snapshot_collection_rows_total{%s,collection="itdb.m"}' % t] == 0
    assert s1["mongocdc_delivery_latency_seconds_count{%s}" % t] >= 185 + 22
    assert 0 <= s1["mongocdc_behind_source_seconds{%s}" % t] < 30
    assert s1["mongocdc_offset_age_seconds{%s}" % t] < 30
    assert s1["mongocdc_oplog_headroom_seconds{%s}" % t] >= 0
    assert s1["process_resident_memory_bytes"] > 0
    assert s1["process_cpu_seconds_total"] > 0
    promtool_ok(get(port, "/metrics")[1])
    assert d.stop(timeout_s=30) == 0


def test_ready_turns_not_ready_when_the_stream_stalls(tmp_workdir, users_sim, start_mongocdc):
    sim = users_sim
    cfg = write_config(tmp_workdir, sim.uri, **{"metrics.enabled": True, "metrics.http.port": 0,
                                                "metrics.ready.window.ms": 2000,
                                                "snapshot.mode": "never"})
    d = start_mongocdc("-c", cfg)
    port = metrics_port(tmp_workdir, d)
    wait_until(lambda: get(port, "/ready")[0] == 200, 30, "ready")
    time.sleep(3)  # idle but answering getMores: still ready
    assert get(port, "/ready")[0] == 200
    members = sim.control("status").get("members", [0, 1, 2])
    for i in range(len(members)):
        sim.control("black_hole", member=i, on=True)
    st, why = wait_until(lambda: (lambda r: r[0] == 503 and r)(get(port, "/ready")), 30,
                         "not ready while the server swallows requests")
    assert "no progress" in why or "reconnecting" in why, why
    assert get(port, "/health")[0] == 200  # alive, only stuck
    for i in range(len(members)):
        sim.control("black_hole", member=i, on=False)
    wait_until(lambda: get(port, "/ready")[0] == 200, 60, "ready again")
    assert d.stop(timeout_s=30) == 0


def test_headroom_warn_with_a_tiny_oplog(tmp_workdir, shared_dir, start_mongocdc):
    sim = Sim(tmp_workdir, extra=["--oplog-size-mb", "0.05"])
    try:
        cfg = write_config(tmp_workdir, sim.uri, **{"metrics.enabled": True,
                                                    "metrics.http.port": 0,
                                                    "snapshot.mode": "never",
                                                    "collection.include.list": "itdb\\.quiet",
                                                    "oplog.headroom.check.interval.ms": 200,
                                                    "oplog.headroom.warn.seconds": 3600})
        d = start_mongocdc("-c", cfg)
        port = metrics_port(tmp_workdir, d)
        c = sim.client()
        # A young oplog (not yet at its capped size) drops nothing: no WARN,
        # though its oldest entry is only seconds old.
        wait_until(lambda: "mongocdc_oplog_headroom_seconds" in get(port, "/metrics")[1], 30,
                   "the headroom gauge")
        time.sleep(1.0)
        assert "oplog headroom is" not in log_text(tmp_workdir)
        for i in range(200):
            c.itdb.busy.insert_one({"_id": i, "pad": "x" * 500})
        wait_until(lambda: "oplog headroom is" in log_text(tmp_workdir), 30, "the headroom WARN")
        line = [ln for ln in log_text(tmp_workdir).splitlines() if "oplog headroom is" in ln][0]
        assert "WARN" in line and "replSetResizeOplog" in line and "heartbeat.interval.ms" in line
        s = samples(get(port, "/metrics")[1])
        h = [v for k, v in s.items() if k.startswith("mongocdc_oplog_headroom_seconds")]
        assert h and h[0] < 3600
        assert d.stop(timeout_s=30) == 0
    finally:
        sim.stop()


@pytest.mark.parametrize("mode", ["change_streams_update_full", "oplog"])
def test_per_collection_labels_are_capped(tmp_workdir, start_mongocdc, mode):
    """metrics.collections.max bounds the collection label: the first N collections seen
    keep their own series, every later one is counted under collection="__overflow__"
    (both capture paths count per collection)."""
    sim = Sim(tmp_workdir)
    try:
        cfg = write_config(tmp_workdir, sim.uri, **{"metrics.enabled": True, "metrics.http.port": 0,
                                                   "metrics.collections.max": 2,
                                                   "capture.mode": mode})
        d = start_mongocdc("-c", cfg)
        port = metrics_port(tmp_workdir, d)
        wait_until(lambda: re.search(r"streaming changes|tailing local\.oplog\.rs", log_text(tmp_workdir)),
                   60, "streaming")
        c = sim.client()
        for i, coll in enumerate(["a", "b", "c", "d", "e"]):
            for k in range(i + 1):
                c.capdb[coll].insert_one({"_id": k})

        def counted():
            s = samples(get(port, "/metrics")[1])
            v = [val for k, val in s.items() if k.startswith("mongocdc_events_emitted_total") and 'op="c"' in k]
            return v and v[0] == 15 and s
        s = wait_until(counted, 30, "15 inserts counted")
        body = get(port, "/metrics")[1]
        promtool_ok(body)
        colls = set(re.findall(r'mongocdc_collection_events_total\{task="[^"]+",collection="([^"]+)"', body))
        assert colls == {"capdb.a", "capdb.b", "__overflow__"}, colls
        ov = [v for k, v in s.items() if 'collection="__overflow__",op="c"' in k]
        assert ov == [3 + 4 + 5]
        assert d.stop(timeout_s=30) == 0
    finally:
        sim.stop()
