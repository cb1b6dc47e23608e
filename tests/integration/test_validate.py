"""--validate refuses what the daemon refuses when it starts: a metrics bind
address that is not an address literal, and a Kafka producer configuration
librdkafka refuses as a whole (rd_kafka_new), for the sink and for the
notification sink channel."""

import pytest

from pipeline_support import write_config

URI = "mongodb://127.0.0.1:1/?replicaSet=rs0&serverSelectionTimeoutMS=200"


@pytest.mark.parametrize("addr", ["localhost", "999.1.1.1"])
def test_metrics_bind_address_refused_by_validate_and_start(tmp_workdir, run_mongocdc, addr):
    cfg = write_config(tmp_workdir, URI, **{"metrics.enabled": True,
                                            "metrics.http.bind.address": addr})
    r = run_mongocdc("--validate", "-c", cfg, timeout_s=30)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 2, err
    assert "metrics.http.bind.address: \"%s\" is not an IPv4 or IPv6 address" % addr in err, err
    # The daemon refuses it too, before it connects anywhere.
    cfg = write_config(tmp_workdir, URI, name="start.yaml", **{"metrics.enabled": True})
    text = cfg.read_text() + "metrics.http.bind.address: \"%s\"\n" % addr
    cfg.write_text(text)
    r = run_mongocdc("-c", cfg, timeout_s=30)
    assert r.returncode != 0


def _kafka_cfg(tmp_workdir, kafka, **opts):
    return write_config(tmp_workdir, URI, kafka=kafka, **opts)


def test_kafka_producer_refused_as_a_whole_fails_validate(tmp_workdir, run_mongocdc):
    bad = {"bootstrap.servers": "127.0.0.1:1", "security.protocol": "ssl",
           "ssl.ca.location": str(tmp_workdir / "missing-ca.pem")}
    cfg = _kafka_cfg(tmp_workdir, bad)
    r = run_mongocdc("--validate", "-c", cfg, timeout_s=30)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 2, err
    assert "kafka: kafka producer: ssl.ca.location" in err, err
    assert "valid" not in r.stdout.decode()
    # The notification sink channel's producer is judged the same way.
    cfg = _kafka_cfg(tmp_workdir, bad, **{"notification.enabled.channels": "sink",
                                          "notification.sink.topic.name": "n"})
    r = run_mongocdc("--validate", "-c", cfg, timeout_s=30)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 2 and "2 problems" in err, err
    assert "notification sink producer" in err, err


def test_kafka_producer_accepted_is_valid_and_quiet(tmp_workdir, run_mongocdc):
    cfg = _kafka_cfg(tmp_workdir, {"bootstrap.servers": "127.0.0.1:1"})
    r = run_mongocdc("--validate", "-c", cfg, timeout_s=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().strip().endswith(": valid")
    assert r.stderr.decode() == ""
