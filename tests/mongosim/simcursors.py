"""Server cursors of the simulator's find/aggregate/getMore (mongo-sim-spec.md §1.7, §5.6): a
list cursor over documents, the tailable oplog cursor, the cursor registry entry and the
reply shapes. Split out of simcommands, which re-exports these names."""

import time

from bson.int64 import Int64

import simbson as sb
import simrollback
from simbson import SimError

MAX_BATCH_BYTES = 16 * 1024 * 1024
DEFAULT_BATCH = 101  # documents in a first batch when the command names no batchSize


class ListCursor(object):
    kind = "list"

    def __init__(self, docs):
        self.docs = docs
        self.pos = 0

    def next_batch(self, limit, wait_ms):
        out = []
        size = 0
        while self.pos < len(self.docs) and (limit is None or len(out) < limit):
            d = self.docs[self.pos]
            size += len(sb.encode(d))
            if size > MAX_BATCH_BYTES and out:
                break
            out.append(d)
            self.pos += 1
        return out, self.pos >= len(self.docs), None


class OplogCursor(object):
    """find on local.oplog.rs: forward scan by ts key, tailable/awaitData (spec §5.6)."""

    kind = "oplog"

    def __init__(self, cl, filt, start_key, tailable, await_data, limit, member=None):
        self.cl = cl
        self.member = member
        self.filter = filt
        # a start point before the oldest entry silently starts at the oldest (spec §5.6)
        self.pos = max(start_key, cl.oplog.truncated_up_to)
        self.tailable = tailable
        self.await_data = await_data
        self.limit = limit
        self.returned = 0

    def next_batch(self, limit, wait_ms):
        cl = self.cl
        oplog = cl.oplog
        deadline = time.time() + max(0, wait_ms) / 1000.0
        while True:
            if getattr(self, "interrupted", False):
                raise simrollback.interrupted_error()
            if oplog.truncated_up_to > self.pos:
                raise SimError(136, "CappedPositionLost",
                               "Executor error during getMore :: caused by :: CollectionScan died due to position in capped collection being deleted. Last seen record id: RecordId(%d)" % self.pos)
            out = []
            size = 0
            idx = oplog.index_after(self.pos)
            n = len(oplog.entries)
            if self.member is not None and getattr(self.member, "lag_ms", 0):
                n = min(n, oplog.index_after(cl.applied_key(self.member)))
            while idx < n:
                if limit is not None and len(out) >= limit:
                    break
                if self.limit and self.returned + len(out) >= self.limit:
                    break
                e = oplog.entries[idx]
                self.pos = oplog.keys[idx]
                idx += 1
                if sb.matches(e, self.filter):
                    out.append(e)
                    size += oplog.sizes[idx - 1]
                    if size > MAX_BATCH_BYTES:
                        break
            self.returned += len(out)
            done_limit = bool(self.limit) and self.returned >= self.limit
            if out or not self.tailable or not self.await_data or done_limit or wait_ms <= 0:
                exhausted = done_limit or (not self.tailable and idx >= n)
                return out, exhausted, None
            rem = deadline - time.time()
            if rem <= 0 or cl.stopping:
                return out, False, None
            cl.oplog_cond.wait(rem)


class CursorEntry(object):
    def __init__(self, cid, ns, impl, lsid, await_data, is_cs):
        self.id = cid
        self.ns = ns
        self.impl = impl
        self.lsid = lsid
        self.await_data = await_data
        self.is_change_stream = is_cs
        self.last_used = time.time()


def ok_reply(**kw):
    r = dict(kw)
    r["ok"] = 1.0
    return r


def cursor_reply(first, batch, cid, ns, pbrt=None, at_cluster_time=None):
    c = {("firstBatch" if first else "nextBatch"): batch}
    if pbrt is not None:
        c["postBatchResumeToken"] = pbrt
    c["id"] = Int64(cid)
    c["ns"] = ns
    if at_cluster_time is not None:
        c["atClusterTime"] = at_cluster_time
    return {"cursor": c, "ok": 1.0}
