"""docs/monitoring: the alert rules and scrape config pass promtool, and
every metric the rules and the Grafana dashboard use is one mongocdc
exposes (read from a live /metrics)."""
import json
import re
import shutil
import subprocess

import pytest

from conftest import SOURCE_DIR, wait_until
from pipeline_support import log_text, write_config

MON = SOURCE_DIR / "docs" / "monitoring"
PROMTOOL = shutil.which("promtool")


def promtool(*args):
    if PROMTOOL is None:
        pytest.fail("promtool not installed (Debian package prometheus; scripts/install-deps.sh)")
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=60)


def test_alert_rules_and_scrape_config_pass_promtool():
    r = promtool("check", "rules", str(MON / "alerts.yml"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS: 9 rules found" in r.stdout + r.stderr
    r = promtool("check", "config", str(MON / "prometheus.yml"))
    assert r.returncode == 0, r.stdout + r.stderr


def test_rules_and_dashboard_use_exposed_metrics(tmp_workdir, start_mongocdc):
    import urllib.request
    # No MongoDB needed: the metric families are described from the start.
    cfg = write_config(tmp_workdir, "mongodb://127.0.0.1:1/?replicaSet=rs0",
                       **{"metrics.enabled": True, "metrics.http.port": 0})
    d = start_mongocdc("-c", cfg)
    port = int(wait_until(lambda: re.search(r"listening on 127\.0\.0\.1 port (\d+)",
                                            log_text(tmp_workdir)), 30, "listener").group(1))
    body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read().decode()
    d.stop(timeout_s=30)
    families = set(re.findall(r"^# TYPE (\S+) (\S+)", body, re.M))
    names = {n for n, _ in families}
    names |= {n + s for n, t in families if t == "histogram" for s in ("_bucket", "_sum", "_count")}
    exprs = [e for e in re.findall(r"expr: (.+)", (MON / "alerts.yml").read_text())]
    dash = json.loads((MON / "grafana-dashboard.json").read_text())
    exprs += [t["expr"] for p in dash["panels"] for t in p["targets"]]
    used = {m for e in exprs for m in re.findall(r"\b((?:mongocdc|process)_[a-z_]+)", e)}
    assert used and used <= names, sorted(used - names)


def test_overflow_alert_fires_only_on_overflow(tmp_workdir):
    """promtool test rules: MongocdcCollectionLabelsOverflow fires when the __overflow__
    series grows, not for named collections."""
    (tmp_workdir / "t.yml").write_text("""rule_files:
  - %s
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'mongocdc_collection_events_total{task="rs0",collection="__overflow__",op="c"}'
        values: '0+5x90'
      - series: 'mongocdc_collection_events_total{task="rs1",collection="shop.orders",op="c"}'
        values: '0+5x90'
      - series: 'up{job="mongocdc"}'
        values: '1x90'
    alert_rule_test:
      - eval_time: 80m
        alertname: MongocdcCollectionLabelsOverflow
        exp_alerts:
          - exp_labels:
              severity: info
              task: rs0
              collection: __overflow__
              op: c
            exp_annotations:
              summary: "mongocdc task rs0 captures more collections than metrics.collections.max: some are counted under __overflow__"
""" % (MON / "alerts.yml"))
    r = promtool("test", "rules", str(tmp_workdir / "t.yml"))
    assert r.returncode == 0, r.stdout + r.stderr
