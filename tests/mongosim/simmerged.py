"""Change streams through mongos in the simulator (mongo-sim-spec.md §6.4): one shard stream per
shard, merged by resume token, an event released only when every shard's high-water mark has
passed it; shards added while the stream is open join it.
"""

import collections
import time

from bson.timestamp import Timestamp

from simbson import SimError
from simcursors import DEFAULT_BATCH
from simstream import ChangeStream, ALLOWED_STAGES, apply_stage


class MergedStream(object):
    """A change stream through mongos: one shard stream per shard, merged by token with the
    minimum high-water-mark gate (spec §6.4)."""

    kind = "changeStream"

    def __init__(self, router, level, db, coll, spec, stages):
        self.router = router
        self.level, self.db, self.coll = level, db, coll
        for st in stages:
            name = next(iter(st))
            if name not in ALLOWED_STAGES:
                raise SimError(40324, "Location40324", "Unrecognized pipeline stage name: '%s'" % name)
        self.spec = dict(spec)
        self.stages = stages
        self.streams = collections.OrderedDict()
        self.hwm = {}
        self.buffer = []  # (data, event, is_invalidate)
        self.closed = False
        if not any(k in self.spec for k in ("resumeAfter", "startAfter", "startAtOperationTime")):
            # A new stream starts at the mongos's cluster time + 1 increment on every shard
            # (spec §6.4), not at each shard's own last entry: an idle shard's older optime
            # would otherwise make the stream's first postBatchResumeToken predate writes
            # already made on the other shards, and resuming from it would return them.
            ct = router.cluster_time()
            self.spec_start = Timestamp(ct.time, ct.inc + 1)
        else:
            self.spec_start = None
        for name, c in router.shards.items():
            spec = dict(self.spec)
            if self.spec_start is not None:
                spec["startAtOperationTime"] = self.spec_start
            self._open(name, c, spec)
        self.pbrt = min((s.pbrt for s in self.streams.values()), key=lambda t: t["_data"])

    def _open(self, name, c, spec):
        st = ChangeStream(c, router_primary(self.router, c), self.level, self.db, self.coll, spec, [], merge=True)
        self.streams[name] = st
        self.hwm[name] = st.pbrt["_data"]

    def _refresh_shards(self):
        for name, c in self.router.shards.items():
            if name not in self.streams:
                # a shard added later is read from its beginning (its add time, spec §6.4)
                spec = {k: v for k, v in self.spec.items() if k not in ("resumeAfter", "startAfter", "startAtOperationTime")}
                spec["startAtOperationTime"] = c.oplog.entries[0]["ts"]
                self._open(name, c, spec)
        for name in list(self.streams):
            if name not in self.router.shards:
                del self.streams[name]
                del self.hwm[name]

    def next_batch(self, limit, wait_ms):
        r = self.router
        deadline = time.time() + max(0, wait_ms) / 1000.0
        limit = DEFAULT_BATCH if limit is None else limit
        while True:
            self._refresh_shards()
            for name, st in self.streams.items():
                evs, closed, pbrt = st.next_batch(100000, 0)
                for e in evs:
                    self.buffer.append((e["_id"]["_data"], e, e.get("operationType") == "invalidate"))
                self.hwm[name] = pbrt["_data"]
            self.buffer.sort(key=lambda x: x[0])
            gate = min(self.hwm.values()) if self.hwm else ""
            ready = [b for b in self.buffer if b[0] <= gate]
            if ready or wait_ms <= 0 or limit == 0:
                break
            rem = deadline - time.time()
            if rem <= 0 or r.stopping:
                break
            r.oplog_cond.wait(rem)
        out = []
        taken = 0
        for data, ev, inv in ready:
            if len(out) >= limit:
                break
            taken += 1
            if inv:
                out.append(ev)
                self.closed = True
                break
            docs = [ev]
            for st in self.stages:
                docs = apply_stage(st, docs)
            for d in docs:
                if not isinstance(d.get("_id"), dict) or d["_id"].get("_data") != data:
                    raise SimError(280, "ChangeStreamFatalError",
                                   "Encountered an event whose _id field, which contains the resume token, was modified by the pipeline.",
                                   ["NonResumableChangeStreamError"])
                out.append(d)
        last_data = ready[taken - 1][0] if taken else None
        self.buffer = self.buffer[taken:]
        more_ready = len(ready) > taken
        if more_ready and last_data is not None:
            cand = {"_data": last_data}
        else:
            cand = {"_data": gate} if gate else None
            if last_data is not None and (cand is None or last_data > cand["_data"]):
                cand = {"_data": last_data}
        if cand is not None and cand["_data"] > self.pbrt["_data"]:
            self.pbrt = cand
        return out, self.closed, self.pbrt


def router_primary(router, c):
    return c.primary or c.members[0]
