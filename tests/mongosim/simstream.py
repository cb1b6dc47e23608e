"""Change streams over the simulator's oplog (mongo-sim-spec.md §3, §5.7, §7).

A stream is a cursor that scans `local.oplog.rs` from a start point, turns entries into events
with the exact field layout of the server version, applies the user's stages and answers
batches with a postBatchResumeToken. Positioning uses bisect on the oplog's ts keys, so opening
or resuming a stream costs O(log n) in the oplog length.
"""

import collections
import copy
import time

from bson.int64 import Int64
from bson.timestamp import Timestamp

import simrollback
from simstages import apply_stage, eval_expr  # noqa: F401 (re-exported)
import simtoken
import simupdate
import simvalue
from simvalue import SimError

INTERNAL_DBS = ("admin", "config", "local")
ALLOWED_STAGES = ("$match", "$project", "$addFields", "$set", "$unset", "$replaceRoot",
                  "$replaceWith", "$redact", "$changeStreamSplitLargeEvent")


def _fragment_num(frag_token_data, event_data):
    """fragmentNum of a fragment's token (the event's token with a KeyString integer appended
    before the end byte, spec §3.11)."""
    raw = bytes.fromhex(frag_token_data[len(event_data) - 2:-2])
    if not raw or raw[0] == 0x29:
        return 0
    return int.from_bytes(raw[1:1 + raw[0] - 0x2A], "big") >> 1


def _labels_nonresumable():
    return ["NonResumableChangeStreamError"]


class ChangeStream(object):
    """Server side of one change-stream cursor. All methods run with the cluster lock held."""

    kind = "changeStream"

    def __init__(self, cl, member, level, db, coll, spec, stages, merge=False):
        self.cl = cl
        self.member = member
        self.level = level  # "collection" | "database" | "cluster"
        self.db = db
        self.coll = coll
        self.stages = stages
        self.pending = collections.deque()
        self.closed = False
        self.invalidated = False
        self.split = bool(stages) and next(iter(stages[-1])) == "$changeStreamSplitLargeEvent"
        for i, st in enumerate(stages):
            name = next(iter(st))
            if name == "$changeStreamSplitLargeEvent" and (i != len(stages) - 1 or cl.wire < 17):
                raise SimError(7182802, "Location7182802",
                               "$changeStreamSplitLargeEvent must be the last stage of a change stream pipeline (6.0.9+)")
            if name not in ALLOWED_STAGES:
                if name.startswith("$"):
                    raise SimError(ALLOWED_ERR_CODE, "Location" + str(ALLOWED_ERR_CODE),
                                   "%s is not permitted in a $changeStream pipeline" % name)
                raise SimError(40324, "Location40324", "Unrecognized pipeline stage name: '%s'" % name)
        known = {"fullDocument", "fullDocumentBeforeChange", "resumeAfter", "startAfter",
                 "startAtOperationTime", "allChangesForCluster", "showExpandedEvents"}
        for k in spec:
            if k not in known or (cl.wire < 17 and k in ("fullDocumentBeforeChange", "showExpandedEvents")):
                raise SimError(40415, "IDLUnknownField", "BSON field '$changeStream.%s' is an unknown field." % k)
        self.full_document = spec.get("fullDocument", "default")
        fd_ok = ("default", "updateLookup") + (("whenAvailable", "required") if cl.wire >= 17 else ())
        if self.full_document not in fd_ok:
            raise SimError(2, "BadValue", "Enumeration value '%s' for field '$changeStream.fullDocument' is not a valid value." % self.full_document)
        self.before = spec.get("fullDocumentBeforeChange", "off")
        if self.before not in ("off", "whenAvailable", "required"):
            raise SimError(2, "BadValue", "Enumeration value '%s' for field '$changeStream.fullDocumentBeforeChange' is not a valid value." % self.before)
        self.expanded = bool(spec.get("showExpandedEvents", False))
        ra, sa, sat = spec.get("resumeAfter"), spec.get("startAfter"), spec.get("startAtOperationTime")
        if ra is not None and sa is not None:
            raise SimError(50865, "Location50865", "Do not specify both 'startAfter' and 'resumeAfter' as resume options.")
        if (ra is not None or sa is not None) and sat is not None:
            raise SimError(40674, "Location40674", "Only one type of resume option is allowed, but multiple were found.")
        self.resume = None
        self.found = True
        self.skip_data = None
        self.resume_version = None
        oplog = cl.oplog
        tok = ra if ra is not None else sa
        if tok is not None:
            r = simtoken.parse_token(tok)
            if r["from_invalidate"] and ra is not None:
                raise SimError(260, "InvalidResumeToken",
                               "Attempting to resume a change stream using 'resumeAfter' is not allowed from an invalidate notification.")
            self.resume = r
            self.resume_version = r["version"]
            self.skip_data = r["data"]
            # a shard stream under mongos treats the token as a high-water mark: only the shard
            # that wrote the event will meet it (spec §6.4)
            self.found = merge or not (r["token_type"] == 128 and not r["from_invalidate"])
            start_key = simtoken.ts_key(r["ts"])
            self.scan_key = start_key - 1
            self.pbrt = {"_data": r["data"]}
            if "_typeBits" in tok:
                self.pbrt["_typeBits"] = tok["_typeBits"]
        elif sat is not None:
            if not isinstance(sat, Timestamp):
                raise SimError(14, "TypeMismatch", "startAtOperationTime must be a timestamp")
            start_key = simtoken.ts_key(sat)
            self.scan_key = start_key - 1
            self.pbrt = simtoken.make_token(sat, cl.token_version, 0)
        else:
            last = oplog.last_key
            start_key = last + 1
            self.scan_key = last
            self.pbrt = simtoken.make_token(simtoken.key_ts(start_key), cl.token_version, 0)
        self.start_key = start_key
        # history check (spec §3.3): the oldest entry must not be newer than the start point,
        # unless a token's oldest entry is the replica set's initiation no-op (a token of this
        # set cannot predate it). A startAtOperationTime before the oldest entry fails like on a
        # real server, initiation or not: the server only compares the two times.
        if tok is not None or sat is not None:
            first = oplog.entries[0] if oplog.entries else None
            if first is not None and oplog.first_key > start_key:
                msg = first.get("o", {}).get("msg") if first.get("op") == "n" else None
                if sat is not None or msg != "initiating set":
                    raise SimError(286, "ChangeStreamHistoryLost",
                                   "Resume of change stream was not possible, as the resume point may no longer be in the oplog.",
                                   _labels_nonresumable())

    # ------------------------------------------------------------------------------
    def _visible(self, db, coll):
        if db in INTERNAL_DBS or coll.startswith("system."):
            return False
        if self.level == "collection":
            return db == self.db and coll == self.coll
        if self.level == "database":
            return db == self.db
        return True

    def _version_for(self, key):
        if self.resume_version is not None and key <= simtoken.ts_key(self.resume["ts"]):
            return self.resume_version
        return self.cl.token_version

    def _token(self, ts, key, op_type, ui, doc_key, txn_idx, invalidate=False, desc=None):
        v = self._version_for(key)
        if doc_key is not None:
            eid = doc_key if v == 1 else {"operationType": op_type, "documentKey": doc_key}
        elif v >= 2 and op_type not in ("dropDatabase",):
            eid = {"operationType": op_type, "operationDescription": desc or {}}
        else:
            eid = None
        return simtoken.make_token(ts, v, 128, txn_idx, invalidate, ui, eid)

    def _head(self, entry, op_type, token, lsid=None, txn_number=None):
        ev = {}
        if lsid is not None:
            ev["txnNumber"] = txn_number
            ev["lsid"] = lsid
        ev["_id"] = token
        ev["operationType"] = op_type
        ev["clusterTime"] = entry["ts"]
        if self.expanded and entry.get("ui") is not None and op_type not in ("dropDatabase", "invalidate"):
            ev["collectionUUID"] = entry["ui"]
        if self.cl.wire >= 17:
            ev["wallTime"] = entry["wall"]
        return ev

    def _crud_event(self, entry, op, txn_idx, lsid, txn_number, img_key):
        ns = op["ns"]
        db, coll = ns.split(".", 1)
        if not self._visible(db, coll):
            return []
        key = simtoken.ts_key(entry["ts"])
        kind = op["op"]
        o = op["o"]
        ui = op.get("ui")
        if kind == "i":
            op_type = "insert"
            dkey = op.get("o2") or {"_id": o["_id"]}
        elif kind == "d":
            op_type = "delete"
            dkey = o
        else:
            dkey = op["o2"]
            if "$v" in o or "_id" not in o:
                op_type = "update"
            else:
                op_type = "replace"
        tok = self._token(entry["ts"], key, op_type, ui, dkey, txn_idx)
        ev = self._head(dict(entry, ui=ui), op_type, tok, lsid, txn_number)
        if op_type in ("insert", "replace"):
            ev["fullDocument"] = o
        ev["ns"] = {"db": db, "coll": coll}
        ev["documentKey"] = dkey
        if op_type == "update":
            dis = {}
            if o.get("$v") == 2:
                upd, rem, trunc, dis = simupdate.diff_to_update_description(o.get("diff", {}))
                ud = {"updatedFields": upd, "removedFields": rem, "truncatedArrays": trunc}
            else:
                ud = {"updatedFields": o.get("$set", {}), "removedFields": list(o.get("$unset", {}).keys())}
                if self.cl.wire >= 13:
                    ud["truncatedArrays"] = []
            if self.expanded and self.cl.wire >= 18:
                ud["disambiguatedPaths"] = dis
            ev["updateDescription"] = ud
        return [(ev, False, (img_key, op_type, db, coll, dkey))]

    def _ddl_events(self, entry, o):
        db = entry["ns"].split(".", 1)[0]
        key = simtoken.ts_key(entry["ts"])
        ui = entry.get("ui")
        out = []
        if "drop" in o:
            coll = o["drop"]
            if not self._visible(db, coll):
                return []
            tok = self._token(entry["ts"], key, "drop", ui, None, 0)
            ev = self._head(entry, "drop", tok)
            ev["ns"] = {"db": db, "coll": coll}
            out.append((ev, False, None))
            if self.level == "collection":
                out.append(self._invalidate(entry, ui, key, "drop"))
        elif "renameCollection" in o:
            src_db, src = o["renameCollection"].split(".", 1)
            dst_db, dst = o["to"].split(".", 1)
            vis_src = self._visible(src_db, src)
            vis_dst = self._visible(dst_db, dst)
            if not (vis_src or vis_dst):
                return []
            desc = {"to": {"db": dst_db, "coll": dst}}
            tok = self._token(entry["ts"], key, "rename", ui, None, 0, desc=desc)
            ev = {"to": {"db": dst_db, "coll": dst}}
            ev.update(self._head(entry, "rename", tok))
            ev["ns"] = {"db": src_db, "coll": src}
            if self.expanded:
                ev["operationDescription"] = desc
            out.append((ev, False, None))
            if self.level == "collection":
                out.append(self._invalidate(entry, ui, key, "rename", desc))
        elif "dropDatabase" in o:
            if self.level == "collection" or (self.level == "database" and db != self.db) or db in INTERNAL_DBS:
                return []
            tok = self._token(entry["ts"], key, "dropDatabase", None, None, 0)
            ev = self._head(entry, "dropDatabase", tok)
            ev["ns"] = {"db": db}
            out.append((ev, False, None))
            if self.level == "database":
                out.append(self._invalidate(entry, None, key, "dropDatabase"))
        elif self.expanded and "dropIndexes" in o:
            name = o["dropIndexes"]
            if not self._visible(db, name):
                return []
            desc = {"indexes": [entry.get("o2") or {"name": o.get("index")}]}
            tok = self._token(entry["ts"], key, "dropIndexes", ui, None, 0, desc=desc)
            ev = self._head(entry, "dropIndexes", tok)
            ev["ns"] = {"db": db, "coll": name}
            ev["operationDescription"] = desc
            out.append((ev, False, None))
        elif self.expanded and ("create" in o or "createIndexes" in o or "collMod" in o):
            name = o.get("create") or o.get("createIndexes") or o.get("collMod")
            if not self._visible(db, name):
                return []
            op_type = "create" if "create" in o else ("createIndexes" if "createIndexes" in o else "modify")
            if op_type == "create":
                desc = {k: v for k, v in o.items() if k != "create"}
            elif op_type == "createIndexes":
                desc = {"indexes": [{k: v for k, v in o.items() if k != "createIndexes"}]}
            else:
                desc = {k: v for k, v in o.items() if k != "collMod"}
            tok = self._token(entry["ts"], key, op_type, ui, None, 0, desc=desc)
            ev = self._head(entry, op_type, tok)
            ev["ns"] = {"db": db, "coll": name}
            ev["operationDescription"] = desc
            if op_type == "modify":
                ev["stateBeforeChange"] = {"collectionOptions": (entry.get("o2") or {}).get("collectionOptions_old", {})}
            out.append((ev, False, None))
        return out

    def _invalidate(self, entry, ui, key, op_type, desc=None):
        tok = self._token(entry["ts"], key, op_type, ui, None, 0, invalidate=True, desc=desc)
        ev = {"_id": tok, "operationType": "invalidate", "clusterTime": entry["ts"]}
        if self.cl.wire >= 17:
            ev["wallTime"] = entry["wall"]
        return (ev, True, None)

    def _events_for(self, entry):
        if entry.get("fromMigrate"):
            return []
        op = entry["op"]
        key = simtoken.ts_key(entry["ts"])
        if op in ("i", "u", "d"):
            return self._crud_event(entry, entry, 0, None, None, (key, 0))
        if op == "c":
            o = entry["o"]
            if "applyOps" in o or "commitTransaction" in o:
                if o.get("partialTxn") or o.get("prepare"):
                    return []
                lsid = entry.get("lsid")
                txn = entry.get("txnNumber")
                out = []
                for i, inner in enumerate(self._txn_ops(entry)):
                    if inner.get("op") in ("i", "u", "d"):
                        out.extend(self._crud_event(entry, inner, i, lsid, txn, (key, i)))
                return out
            return self._ddl_events(entry, o)
        if op == "n" and self.expanded and isinstance(entry.get("o2"), dict) and "shardCollection" in entry["o2"]:
            db, coll = entry["ns"].split(".", 1)
            if not self._visible(db, coll):
                return []
            desc = {k: v for k, v in entry["o2"].items() if k != "shardCollection"}
            tok = self._token(entry["ts"], key, "shardCollection", entry.get("ui"), None, 0, desc=desc)
            ev = self._head(entry, "shardCollection", tok)
            ev["ns"] = {"db": db, "coll": coll}
            ev["operationDescription"] = desc
            return [(ev, False, None)]
        return []

    def _fragment_token(self, ev, data, num):
        tok = dict(ev["_id"])
        tok["_data"] = data[:-2] + simtoken._ks_int(num).hex().upper() + "04"
        return tok

    def _split(self, ev, data, max_fragment):
        """$changeStreamSplitLargeEvent (server change_stream_split_event_helpers.cpp,
        splitChangeEvent): every top-level field but `_id`, ordered by (BSON element size,
        name), is packed greedily into fragments of at most max_fragment bytes; each fragment
        is `{_id: <the event's token with fragmentNum = index>, splitEvent: {fragment: n,
        of: total}, <fields>}` and takes at least one field. A field that does not fit into a
        fragment of its own fails with 7182500. The first `skip` fragments (already received
        by a client resuming from a fragment's token) are left out by the caller."""
        fields = []
        for k, v in ev.items():
            if k != "_id":
                fields.append((len(simvalue.encode({k: v})) - 5, k.encode("utf-8"), k, v))
        if not fields:
            raise SimError(7182502, "Location7182502",
                           "Cannot split an empty event or an event containing solely '_id' field")
        fields.sort(key=lambda f: (f[0], f[1]))
        frags = []
        i = 0
        while i < len(fields):
            num = len(frags)
            f = {"_id": self._fragment_token(ev, data, num),
                 "splitEvent": {"fragment": num + 1, "of": 0}}
            size = len(simvalue.encode(f))
            while True:
                fsize, _, k, v = fields[i]
                f[k] = v
                size += fsize
                i += 1
                if i >= len(fields) or size + fields[i][0] > max_fragment:
                    break
            if size > max_fragment:
                raise SimError(7182500, "Location7182500",
                               "Splitting change event failed: fragment size %d is greater than maximum allowed fragment size %d" % (size, max_fragment))
            frags.append(f)
        for f in frags:
            f["splitEvent"]["of"] = len(frags)
        return frags

    def _output(self, d, data, poisoned, frag_skip):
        """What one event that passed the user's stages becomes on the cursor (spec §3.12): the
        event itself when it fits in the server's limit for a change event
        (BSONObjMaxInternalSize, 16 MiB + 16 KiB, `max_event_bytes`), its fragments when the
        pipeline ends with $changeStreamSplitLargeEvent, else 10334 BSONObjectTooLarge. The
        size is that of the event after the stages, so stages before can shrink or drop it.
        A poisoned entry (control `poison_event`) counts as 16793699 bytes.
        Returns a list of (document, BSON size)."""
        limit = getattr(self.cl, "max_event_bytes", MAX_EVENT_BYTES)
        size = 16793699 if poisoned else len(simvalue.encode(d))
        tok_size = len(simvalue.encode(d["_id"]))
        if self.split:
            # the split stage counts the _id twice: the cursor's postBatchResumeToken repeats it
            # (processChangeEventBeforeSplit), and leaves room for the token in each fragment
            skip = 0
            if frag_skip is not None:
                skip = _fragment_num(frag_skip, data) + 1
            if size + 5 + tok_size + tok_size <= limit:
                if skip:
                    raise SimError(280, "ChangeStreamFatalError",
                                   "Attempted to resume from a split event, but the resumed stream produced a different split. Ensure that the pipeline used to resume is the same as the original",
                                   _labels_nonresumable())
                return [(d, size)]
            frags = self._split(d, data, limit - tok_size)
            if skip > len(frags):
                raise SimError(280, "ChangeStreamFatalError",
                               "Attempted to resume from a split event, but the resumed stream produced a different split. Ensure that the pipeline used to resume is the same as the original",
                               _labels_nonresumable())
            # from the last fragment's token the stream goes on with the next event
            return [(f, len(simvalue.encode(f))) for f in frags[skip:]]
        if size > limit:
            raise SimError(10334, "BSONObjectTooLarge",
                           "Executor error during getMore :: caused by :: BSONObj size: %d (0x%X) is invalid. Size must be between 0 and %d(16MB) First element: _id: %r" % (size, size, limit, d["_id"]))
        return [(d, size)]

    def _txn_ops(self, entry):
        """All operations of a transaction ending at entry, following prevOpTime through the
        partialTxn chain (spec §5.4)."""
        chain = [entry]
        prev = entry.get("prevOpTime")
        oplog = self.cl.oplog
        while prev is not None and prev["ts"].time != 0 and len(chain) < 100000:
            i = oplog.index_at_or_after(simtoken.ts_key(prev["ts"]))
            if i >= len(oplog.keys) or oplog.keys[i] != simtoken.ts_key(prev["ts"]):
                break  # the chain's start was truncated away
            e = oplog.entries[i]
            chain.append(e)
            prev = e.get("prevOpTime")
        ops = []
        for e in reversed(chain):
            ops.extend(e["o"].get("applyOps", []))
        return ops

    def _finish(self, ev, extra):
        """Add fullDocument lookups / images at reply time (spec §3.9)."""
        if extra is None:
            return ev
        img_key, op_type, db, coll, dkey = extra
        imgs = self.cl.oplog.images.get(img_key)
        if op_type == "update" and self.full_document != "default":
            if self.full_document == "updateLookup":
                cur = simrollback.majority_doc(self.cl, db, coll, simvalue.id_key(dkey.get("_id")))
                ev["fullDocument"] = copy.deepcopy(cur) if cur is not None else None
            else:
                post = imgs[1] if imgs else None
                if post is None and self.full_document == "required":
                    raise SimError(47, "NoMatchingDocument",
                                   "Change stream was configured to require a post-image for all update, delete and replace events, but the post-image was not found for event: %r" % (ev["_id"],))
                ev["fullDocument"] = post
        if self.before != "off" and op_type in ("update", "replace", "delete"):
            pre = imgs[0] if imgs else None
            if pre is None and self.before == "required":
                raise SimError(47, "NoMatchingDocument",
                               "Change stream was configured to require a pre-image for all update, delete and replace events, but the pre-image was not found for event: %r" % (ev["_id"],))
            ev["fullDocumentBeforeChange"] = pre
        return ev

    def _scan(self, limit):
        oplog = self.cl.oplog
        if oplog.truncated_up_to > self.scan_key:
            raise SimError(136, "CappedPositionLost",
                           "Executor error during getMore :: caused by :: CollectionScan died due to position in capped collection being deleted. Last seen record id: RecordId(%d)" % self.scan_key)
        idx = oplog.index_after(self.scan_key)
        entries, keys = oplog.entries, oplog.keys
        # only majority-committed entries are visible to change streams (spec §3.1)
        end = oplog.index_after(self.cl.majority_key())
        if getattr(self.member, "lag_ms", 0):
            end = min(end, oplog.index_after(self.cl.applied_key(self.member)))
        while idx < end and len(self.pending) < limit and not self.invalidated:
            entry = entries[idx]
            evs = self._events_for(entry)
            poisoned = bool(evs) and keys[idx] in self.cl.poison_keys
            out = []
            for ev, is_inv, extra in evs:
                data = ev["_id"]["_data"]
                frag_skip = None
                if self.skip_data is not None and self.skip_data != data and \
                        self.skip_data.startswith(data[:-2]):
                    # resuming from a fragment of this event: emit its later fragments
                    self.found = True
                    frag_skip = self.skip_data
                elif self.skip_data is not None:
                    if data < self.skip_data:
                        continue
                    if data == self.skip_data:
                        self.found = True
                        continue
                    if not self.found:
                        raise SimError(280, "ChangeStreamFatalError",
                                       "cannot resume stream; the resume token was not found. %r" % ({"_data": self.skip_data},),
                                       _labels_nonresumable())
                if is_inv:
                    out.append((ev, True, 0))
                    break
                ev = self._finish(ev, extra)
                docs = [ev]
                for st in self.stages:
                    docs = apply_stage(st, docs)
                for d in docs:
                    if not isinstance(d.get("_id"), dict) or d["_id"].get("_data") != data:
                        raise SimError(280, "ChangeStreamFatalError",
                                       "Encountered an event whose _id field, which contains the resume token, was modified by the pipeline. Modifying the _id field of an event makes it impossible to resume the stream from that point. Only transformations that retain the unmodified _id field are allowed.",
                                       _labels_nonresumable())
                    for f, size in self._output(d, data, poisoned, frag_skip):
                        out.append((f, False, size))
            # an error above leaves the cursor where it was: every retry meets the same event
            for ev, is_inv, size in out:
                self.pending.append((ev, is_inv, size))
                if is_inv:
                    self.invalidated = True
            self.scan_key = keys[idx]
            idx += 1

    def next_batch(self, limit, wait_ms):
        """Return (events, cursor_closed, pbrt). Waits up to wait_ms for the first event."""
        cl = self.cl
        deadline = time.time() + max(0, wait_ms) / 1000.0
        if limit is None or limit <= 0:
            limit = 101 if limit is None else limit
        while True:
            if getattr(self, "interrupted", False):
                raise simrollback.interrupted_error()
            if limit > 0:
                self._scan(limit)
            if self.pending or wait_ms <= 0 or limit == 0:
                break
            rem = deadline - time.time()
            if rem <= 0 or cl.stopping:
                break
            # with lagging secondaries the commit point moves without a write: look again soon
            cl.oplog_cond.wait(min(rem, 0.005) if any(m.lag_ms for m in cl.members) else rem)
        batch = []
        size = 0
        while self.pending and len(batch) < limit:
            ev, inv, ev_size = self.pending[0]
            if not inv:
                size += ev_size
                if size > 16 * 1024 * 1024 and batch:
                    break
            self.pending.popleft()
            batch.append(ev)
            if inv:
                self.closed = True
                break
        if batch:
            cand = batch[-1]["_id"]
        else:
            cand = None
        if not self.pending and not self.closed and self.scan_key >= self.start_key:
            hwm = simtoken.make_token(simtoken.key_ts(self.scan_key), self._version_for(self.scan_key), 0)
            if cand is None or hwm["_data"] > cand["_data"]:
                cand = hwm
        if cand is not None and cand["_data"] > self.pbrt["_data"]:
            self.pbrt = {k: v for k, v in cand.items()}
        return batch, self.closed, self.pbrt


ALLOWED_ERR_CODE = 31324
# BSONObjMaxInternalSize: the largest change event a server returns (16 MiB + 16 KiB); the
# cluster's `max_event_bytes` (--max-event-bytes, control `max_event_bytes`) overrides it
MAX_EVENT_BYTES = 16 * 1024 * 1024 + 16 * 1024
