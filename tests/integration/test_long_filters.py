"""A collection.include.list of 10,000 regular expressions (about 270 KB as one
alternation) against the simulator, which refuses a regex over the server's
16384-byte limit as MongoDB does (51091 / 51111): the change stream opens and
the listed collection's changes arrive, an unlisted one's do not."""

import json

from conftest import wait_until
from pipeline_support import Sim, data_records, log_text, read_jsonl, write_config


def test_ten_thousand_regex_entries_open_the_stream(tmp_workdir, start_mongocdc):
    sim = Sim(tmp_workdir)
    try:
        entries = ["shop%d\\.orders_%d_[a-z]+" % (i, i) for i in range(10000)]
        cfg = write_config(tmp_workdir, sim.uri,
                           **{"collection.include.list": ",".join(entries)})
        d = start_mongocdc("-c", cfg)

        def streaming():
            if not d.running():
                raise AssertionError("mongocdc exited: " + log_text(tmp_workdir)[-3000:])
            return "streaming changes from" in log_text(tmp_workdir)
        wait_until(streaming, 90, "streaming to start")
        c = sim.client()
        c.shop9999.orders_9999_abc.insert_one({"_id": "listed"})
        c.shop9999.orders_9998_abc.insert_one({"_id": "not-listed"})
        c.shop5.orders_5_x.insert_one({"_id": "listed-too"})

        def got():
            return [json.loads(json.loads(r.key)["id"]) for r in data_records(
                read_jsonl(tmp_workdir / "events.jsonl"), "it")]
        wait_until(lambda: len(got()) >= 2, 60, "both listed inserts")
        assert sorted(got()) == ["listed", "listed-too"], got()
        assert d.stop(timeout_s=60) == 0
    finally:
        sim.stop()
