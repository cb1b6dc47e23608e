"""The command-line contract the daemon's integration tests rely on: one JSON ready line,
then serve until SIGTERM."""

import json
import os
import signal
import subprocess
import sys

import pymongo

from conftest import SIM_DIR, dataset


def test_ready_line_load_and_sigterm():
    """mongosim.py prints {"ready", "uri", "control", "members", "mongos", "config"} once the
    data of --load FILE:db.coll is in, serves the URI, and exits 0 on SIGTERM."""
    path = dataset("classic/students.json")
    p = subprocess.Popen(["/usr/bin/python3", os.path.join(SIM_DIR, "mongosim.py"), "--topology", "replset",
                          "--members", "2", "--base-port", "0", "--load", path + ":school.students"],
                         stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        info = json.loads(line)
        assert info["ready"] is True and info["mongos"] == [] and info["config"] == []
        assert info["uri"].startswith("mongodb://127.0.0.1:") and info["uri"].endswith("/?replicaSet=rs0")
        assert [m["state"] for m in info["members"]] == ["PRIMARY", "SECONDARY"]
        assert info["control"].startswith("http://127.0.0.1:")
        c = pymongo.MongoClient(info["uri"], serverSelectionTimeoutMS=5000)
        with open(path) as f:
            n = sum(1 for l in f if l.strip())
        assert c.school.students.estimated_document_count() == n
        c.close()
        p.send_signal(signal.SIGTERM)
        assert p.wait(10) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
        p.stdout.close()
