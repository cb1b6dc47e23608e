"""Read commands of the MongoDB simulator (mongo-sim-spec.md §1.7, §2, §3): find
(collections and the oplog, snapshot reads), getMore, killCursors, count, distinct, collStats,
dbStats. A mixin of simcommands.Dispatcher.
"""

import copy
import functools
import time

from bson.int64 import Int64

import simbson as sb
from simbson import SimError
import simquery
import simrollback
from simserver import Writer
from simcursors import DEFAULT_BATCH, ListCursor, OplogCursor, cursor_reply, ok_reply


class ReadCommands(object):
    """find / getMore / killCursors and the counting and stats handlers."""

    # ------------------------------------------------------------------ reads
    def _docs(self, body, db, coll):
        txn = self._txn_for(body)
        m = getattr(self, "cur_member", None)
        if txn is None and m is not None and getattr(m, "lag_ms", 0) and m.state != "PRIMARY":
            # a lagging secondary answers from the state at its last applied entry
            return self.cl.snapshot_docs(db, coll, sb.key_ts(self.cl.applied_key(m)))
        return Writer(self.cl, db, txn).docs(coll)

    def cmd_find(self, member, body, conn):
        self._check_read(member, body)
        db, coll = body["$db"], body["find"]
        ns = "%s.%s" % (db, coll)
        filt = body.get("filter") or {}
        simquery.check_regex_limits(filt)
        sort = body.get("sort") or {}
        proj = body.get("projection")
        skip = int(body.get("skip", 0) or 0)
        limit = int(body.get("limit", 0) or 0)
        single = bool(body.get("singleBatch")) or limit < 0
        limit = abs(limit)
        bs = body.get("batchSize")
        bs = int(bs) if bs is not None else None
        tailable = bool(body.get("tailable"))
        await_data = bool(body.get("awaitData"))
        lsid = body.get("lsid")
        rc = body.get("readConcern") or {}
        at_time = None
        if rc.get("level") == "snapshot" and body.get("autocommit") is None:
            at_time = self._snapshot_time(rc)
        if db == "local" and coll == "oplog.rs":
            return self._find_oplog(member, body, filt, sort, proj, skip, limit, bs, single, tailable, await_data, lsid)
        if tailable:
            raise SimError(2, "BadValue", "error processing query: %s tailable cursor requested on non capped collection" % ns)
        src = self.cl.snapshot_docs(db, coll, at_time) if at_time is not None else \
            simrollback.majority_view(self.cl, db, coll, rc, body.get("maxTimeMS"))
        if src is None:
            src = self._docs(body, db, coll)
        plan = sb.id_index_plan(filt)
        docs = sb.id_index_find(src, plan) if plan else [d for d in src if sb.matches(d, filt)]
        mn, mx = body.get("min"), body.get("max")
        if mn is not None or mx is not None:
            # min/max bound an index scan: they need a hint, compare across types (no type
            # bracketing, spec §1.9) and come back in index order
            hint = body.get("hint")
            if hint is None:
                raise SimError(51173, "Location51173", "When using min()/max() a hint of which index to use must be specified")
            key = list(hint.keys()) if isinstance(hint, dict) else ["_id"]
            if hint not in ({"_id": 1}, "_id_") or any(list(b.keys()) != key for b in (mn, mx) if b is not None):
                raise SimError(51174, "Location51174", "The index implied by min() and max() must match the hint; the simulator only has the _id index")
            if mn is not None:
                docs = [d for d in docs if sb.cmp_values(d["_id"], mn["_id"]) >= 0]
            if mx is not None:
                docs = [d for d in docs if sb.cmp_values(d["_id"], mx["_id"]) < 0]
            if not sort:
                docs = sb.sort_docs(docs, {"_id": 1})
        if sort:
            docs = sb.sort_docs(docs, sort)
        docs = docs[skip:]
        if limit:
            docs = docs[:limit]
        if proj:
            docs = [sb.project(d, proj) for d in docs]
        else:
            docs = [copy.deepcopy(d) for d in docs]
        cur = ListCursor(docs)
        first_n = bs if bs is not None else DEFAULT_BATCH
        if single:
            first_n = len(docs) if bs is None else bs
        batch, done, _ = cur.next_batch(first_n, 0)
        cid = 0
        if not done and not single:
            cid = self._register_cursor(member, ns, cur, lsid, False, False)
        return cursor_reply(True, batch, cid, ns, at_cluster_time=at_time)

    def _snapshot_time(self, rc):
        cl = self.cl
        if cl.wire < 13:
            raise SimError(72, "InvalidOptions", "read concern level snapshot is only valid in a transaction")
        t = rc.get("atClusterTime")
        if t is not None and "afterClusterTime" in rc:
            raise SimError(72, "InvalidOptions", "Specifying a timestamp for readConcern snapshot in a causally consistent session is not allowed")
        if t is None:  # the newest majority-committed snapshot
            return sb.key_ts(cl.majority_frozen) if cl.majority_frozen is not None else cl.cluster_time()
        if sb.ts_key(t) < cl.undo_floor:
            raise SimError(239, "SnapshotTooOld",
                           "Read timestamp Timestamp(%d, %d) is older than the oldest available timestamp." % (t.time, t.inc))
        simrollback.wait_majority(cl, t)  # a snapshot at T is a majority-committed one
        return t

    def _find_oplog(self, member, body, filt, sort, proj, skip, limit, bs, single, tailable, await_data, lsid):
        cl = self.cl
        oplog = cl.oplog
        ns = "local.oplog.rs"
        nat = sort.get("$natural") if sort else None
        if sort and nat is None:
            raise SimError(2, "BadValue", "the simulator sorts local.oplog.rs only by $natural")
        if nat is not None and nat < 0:
            if tailable:
                raise SimError(2, "BadValue", "tailable cursor requested on a reverse scan")
            out = []
            skipped = 0
            for e in reversed(oplog.entries):
                if sb.matches(e, filt):
                    if skipped < skip:
                        skipped += 1
                        continue
                    out.append(sb.project(e, proj) if proj else e)
                    if limit and len(out) >= limit:
                        break
            cur = ListCursor(out)
            batch, done, _ = cur.next_batch(bs if bs is not None else (len(out) if single else DEFAULT_BATCH), 0)
            cid = 0 if (done or single) else self._register_cursor(member, ns, cur, lsid, False, False)
            return cursor_reply(True, batch, cid, ns)
        start = -1
        tsc = filt.get("ts")
        if isinstance(tsc, dict):
            if "$gt" in tsc and hasattr(tsc["$gt"], "time"):
                start = sb.ts_key(tsc["$gt"])
            elif "$gte" in tsc and hasattr(tsc["$gte"], "time"):
                start = sb.ts_key(tsc["$gte"]) - 1
        elif hasattr(tsc, "time"):
            start = sb.ts_key(tsc) - 1
        cur = OplogCursor(cl, filt, start, tailable, await_data, limit, member)
        if skip:
            cur.next_batch(skip, 0)
        first_n = bs if bs is not None else DEFAULT_BATCH
        batch, done, _ = cur.next_batch(first_n, 0)
        if proj:
            batch = [sb.project(e, proj) for e in batch]
        cid = 0
        if not done and not single:
            cid = self._register_cursor(member, ns, cur, lsid, await_data, False)
            member.cursors[cid].proj = proj
        return cursor_reply(True, batch, cid, ns)

    def cmd_getMore(self, member, body, conn):
        cid = int(body["getMore"])
        coll = body.get("collection")
        ce = member.cursors.get(cid)
        if ce is None:
            raise SimError(43, "CursorNotFound", "cursor id %d not found" % cid)
        db = body["$db"]
        if ce.ns.split(".", 1)[0] != db or (coll != ce.ns.split(".", 1)[1] and not ce.ns.endswith(".$cmd.aggregate")) \
                or (ce.ns.endswith(".$cmd.aggregate") and coll not in ("$cmd.aggregate",)):
            raise SimError(13, "Unauthorized", "Requested getMore on namespace '%s.%s', but cursor belongs to a different namespace %s" % (db, coll, ce.ns))
        if getattr(self.cl, "users", None) and getattr(ce, "user", None) != conn.authenticated:
            # getmore_cmd.cpp: the cursor's authenticated user must be this connection's
            raise SimError(13, "Unauthorized", "cursor id %d was not created by the authenticated user" % cid)
        lsid = body.get("lsid")
        if ce.lsid is None and lsid is not None:
            raise SimError(50736, "Location50736", "Cannot run getMore on cursor %d, which was not created in a session, in session %r" % (cid, lsid.get("id")))
        if ce.lsid is not None and lsid is None:
            raise SimError(50737, "Location50737", "Cannot run getMore on cursor %d, which was created in session %r, without an lsid" % (cid, ce.lsid.get("id")))
        if ce.lsid is not None and lsid.get("id") != ce.lsid.get("id"):
            raise SimError(50738, "Location50738", "Cannot run getMore on cursor %d, which was created in session %r, in session %r" % (cid, ce.lsid.get("id"), lsid.get("id")))
        mt = body.get("maxTimeMS")
        if mt is not None and not ce.await_data:
            raise SimError(2, "BadValue", "cannot set maxTimeMS on getMore command for a non-awaitData cursor")
        bs = body.get("batchSize")
        bs = int(bs) if bs else None
        wait = int(mt) if mt is not None else 1000
        if not ce.await_data:
            wait = 0
        ce.last_used = time.time()
        try:
            batch, done, pbrt = ce.impl.next_batch(bs if bs is not None or ce.is_change_stream else None, wait)
        except SimError:
            member.cursors.pop(cid, None)
            raise
        if getattr(ce, "proj", None):
            batch = [sb.project(e, ce.proj) for e in batch]
        if done:
            member.cursors.pop(cid, None)
        return cursor_reply(False, batch, 0 if done else cid, ce.ns, pbrt)

    def cmd_killCursors(self, member, body, conn):
        killed, missing = [], []
        for c in body.get("cursors", []):
            if member.cursors.pop(int(c), None) is not None:
                killed.append(Int64(c))
            else:
                missing.append(Int64(c))
        return ok_reply(cursorsKilled=killed, cursorsNotFound=missing, cursorsAlive=[], cursorsUnknown=[])

    def cmd_count(self, member, body, conn):
        self._check_read(member, body)
        db, coll = body["$db"], body["count"]
        q = body.get("query") or {}
        if db == "local" and coll == "oplog.rs":
            docs = self.cl.oplog.entries if not q else [e for e in self.cl.oplog.entries if sb.matches(e, q)]
            n = len(docs)
        else:
            docs = self._docs(body, db, coll)
            n = len(docs) if not q else sum(1 for d in docs if sb.matches(d, q))
        skip = int(body.get("skip", 0) or 0)
        n = max(0, n - skip)
        lim = abs(int(body.get("limit", 0) or 0))
        if lim:
            n = min(n, lim)
        return ok_reply(n=n)

    def cmd_distinct(self, member, body, conn):
        self._check_read(member, body)
        db, coll = body["$db"], body["distinct"]
        key = body["key"]
        q = body.get("query") or {}
        vals = []
        for d in self._docs(body, db, coll):
            if q and not sb.matches(d, q):
                continue
            for v in sb.get_path_values(d, key):
                for x in (v if isinstance(v, list) else [v]):
                    if not any(sb.values_equal(x, y) and sb.canon(x) == sb.canon(y) for y in vals):
                        vals.append(x)
        vals.sort(key=functools.cmp_to_key(sb.cmp_values))
        return ok_reply(values=vals)

    def cmd_collStats(self, member, body, conn):
        db, coll = body["$db"], body["collStats"]
        if db == "local" and coll == "oplog.rs":
            # as a real server: the capped oplog's bytes and its cap (maxSize)
            ol = self.cl.oplog
            return ok_reply(ns="local.oplog.rs", count=len(ol.entries), size=Int64(ol.total),
                            capped=True, maxSize=Int64(ol.cap or 990 * 1048576), nindexes=0)
        docs = self._docs(body, db, coll)
        size = sum(len(sb.encode(d)) for d in docs[:1000]) * max(1, len(docs)) // max(1, min(len(docs), 1000))
        return ok_reply(ns="%s.%s" % (db, coll), count=len(docs), size=size,
                        avgObjSize=(size // len(docs)) if docs else 0, nindexes=1)

    def cmd_dbStats(self, member, body, conn):
        db = body["$db"]
        colls = self.cl.store.get(db, {})
        return ok_reply(db=db, collections=len(colls), objects=sum(len(c.docs) for c in colls.values()))
