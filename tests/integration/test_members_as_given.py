"""mongodb.members.auto.discover: false with several addresses (Debezium 1.x,
debezium-format.md §6.1: the addresses are used as given, for members behind
NAT or in containers). The simulator's members report names in `hello` that
do not resolve (--advertise-host), as such members do: a driver left to its
own discovery replaces the given addresses with those names and connects to
nothing. mongocdc talks only to the given addresses: it finds the primary
among them, snapshots and streams from it directly, and after a stepdown
finds the new primary among the same addresses and resumes, nothing lost.
"""

import json
import time

from conftest import import_mongosim, wait_until
from pipeline_support import key_id_text, log_text, sink_records, write_config

PREFIX = "it"
UNRESOLVABLE = "member.invalid"  # RFC 6761: .invalid never resolves


def direct(addr):
    import pymongo
    return pymongo.MongoClient(addr, directConnection=True, serverSelectionTimeoutMS=10000)


def ids(path, op):
    return [json.loads(key_id_text(r)) for r in sink_records(path) if r.op == op]


def test_replica_set_behind_nat_snapshot_stream_and_stepdown(tmp_workdir, start_mongocdc,
                                                             run_mongocdc):
    mongosim = import_mongosim()
    sim = mongosim.MongoSim(topology="replset", members=3, noop_interval=0.3,
                            extra_args=["--advertise-host", UNRESOLVABLE])
    sim.start()
    try:
        members = sim.info["members"]
        primary = next(m["host"] for m in members if m["state"] == "PRIMARY")
        hello = direct(primary).admin.command("hello")
        assert all(h.startswith(UNRESOLVABLE + ":") for h in hello["hosts"]), hello["hosts"]
        c = direct(primary)
        c.shop.orders.insert_many([{"_id": i, "v": 0} for i in range(50)])

        # A dead address among the given ones (nothing listens on port 1) is skipped.
        uri = sim.uri.replace("mongodb://", "mongodb://127.0.0.1:1,")
        cfg = write_config(tmp_workdir, uri, raw={"mongodb.members.auto.discover": False})
        # `mongocdc check` connects by the same rule.
        r = run_mongocdc("check", "-c", cfg, timeout_s=60)
        out = r.stdout.decode()
        assert r.returncode == 0, out + r.stderr.decode()
        assert "replica set rs0" in out and out.rstrip().endswith("OK: every check passed"), out

        d = start_mongocdc("-c", cfg)
        sink = tmp_workdir / "events.jsonl"

        def streaming():
            if not d.running():
                raise AssertionError("mongocdc exited: " + log_text(tmp_workdir)[-3000:])
            return "streaming changes from" in log_text(tmp_workdir)
        wait_until(streaming, 60, "the snapshot through the given addresses")
        assert "primary at %s" % primary in log_text(tmp_workdir)
        assert sorted(ids(sink, "r")) == list(range(50))

        c.shop.orders.insert_many([{"_id": 100 + i} for i in range(20)])
        wait_until(lambda: len(ids(sink, "c")) >= 20, 30, "the first inserts streamed")

        elected = sim.control("stepdown")["elected"]
        new_primary = sim.members[elected]
        assert new_primary != primary
        c.close()
        c = direct(new_primary)
        c.shop.orders.insert_many([{"_id": 200 + i} for i in range(20)])
        want = [100 + i for i in range(20)] + [200 + i for i in range(20)]
        wait_until(lambda: len(ids(sink, "c")) >= len(want), 60,
                   "the inserts on the new primary streamed")
        time.sleep(1)
        got = ids(sink, "c")
        assert sorted(set(got)) == want, "lost across the stepdown"
        dups = len(got) - len(set(got))
        print("stepdown behind NAT: %d inserts, %d duplicates" % (len(want), dups))
        assert dups == 0, "the resume after the stepdown repeated %d events" % dups
        log = log_text(tmp_workdir)
        assert "primary at %s" % new_primary in log, log[-3000:]
        assert "no longer primary" in log
        assert d.stop(timeout_s=30) == 0
        c.close()
    finally:
        sim.stop()
