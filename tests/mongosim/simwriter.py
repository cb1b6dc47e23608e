"""Writes on a replica set's store: plain statements logged one entry each, or buffered in a
transaction's overlay and logged as applyOps at commit; prepared (cross-shard) transactions
(mongo-sim-spec.md §5.2, §5.4). Split out of simserver, which re-exports these names."""

import copy
import hashlib
import re

from bson.binary import Binary
from bson.int64 import Int64
from bson.objectid import ObjectId
from bson.regex import Regex
from bson.timestamp import Timestamp

import simbson as sb
from simbson import SimError

EMPTY_UID = Binary(hashlib.sha256(b"").digest(), 0)


def check_ns(db, coll):
    if not db or "." in db or "$" in db or " " in db:
        raise SimError(73, "InvalidNamespace", "Invalid database name: '%s'" % db)
    if not coll or "$" in coll:
        raise SimError(73, "InvalidNamespace", "Invalid collection name: '%s'" % coll)


# ---------------------------------------------------------------------------------------
# writes (plain or inside a transaction)

class Writer(object):
    """Applies CRUD statements for one database, either directly (plain writes, each logged
    immediately, spec §5.2) or into a Txn overlay (logged at commit as applyOps, §5.4)."""

    def __init__(self, cl, db, txn, lsid=None, txn_number=None):
        self.cl = cl
        self.db = db
        self.txn = txn
        self.lsid = lsid
        self.txn_number = txn_number
        self.stmt_id = 0  # index of the statement in its command (retryable writes)
        self.last_op_ts = None
        self.last_op_t = None
        self._undo = []

    # document views --------------------------------------------------------------
    def docs(self, coll):
        c = self.cl.get_coll(self.db, coll)
        base = list(c.docs.items()) if c is not None else []
        if self.txn is None:
            return [d for _, d in base]
        out = []
        seen = set()
        for k, d in base:
            ok = (self.db, coll, k)
            seen.add(k)
            if ok in self.txn.overlay:
                if self.txn.overlay[ok] is not None:
                    out.append(self.txn.overlay[ok])
            else:
                out.append(d)
        for (db, cn, k), d in self.txn.overlay.items():
            if db == self.db and cn == coll and k not in seen and d is not None:
                out.append(d)
        return out

    def get(self, coll, key):
        if self.txn is not None and (self.db, coll, key) in self.txn.overlay:
            return self.txn.overlay[(self.db, coll, key)]
        c = self.cl.get_coll(self.db, coll)
        return c.docs.get(key) if c is not None else None

    def _put(self, c, key, doc):
        if self.txn is None:
            self._undo.append((self.db, c.name, key, c.docs.get(key)))
            if doc is None:
                c.docs.pop(key, None)
            else:
                c.docs[key] = doc
        else:
            self.txn.overlay[(self.db, c.name, key)] = doc

    def _log(self, entry, images=None):
        if self.txn is None:
            if self.lsid is not None and self.txn_number is not None and "id" in self.lsid:
                # A retryable write's entries carry the session, the statement's
                # index and a prevOpTime chain through the command's earlier
                # entries (oplog_entry.idl; spec §5.1).
                entry = dict(entry)
                entry["lsid"] = {"id": self.lsid["id"], "uid": EMPTY_UID}
                entry["txnNumber"] = Int64(self.txn_number)
                entry["stmtId"] = int(self.stmt_id)
                entry["prevOpTime"] = ({"ts": self.last_op_ts, "t": self.last_op_t}
                                       if self.last_op_ts is not None
                                       else {"ts": Timestamp(0, 0), "t": Int64(-1)})
            e = self.cl.append_entry(entry)
            self.last_op_ts = e["ts"]
            self.last_op_t = e["t"]
            self.cl.record_undo(e["ts"], self._undo)
            self._undo = []
            if images is not None:
                self.cl.oplog.images[(sb.ts_key(e["ts"]), 0)] = images
        else:
            self.txn.ops.append(entry)
            self.txn.images.append(images)

    def doc_key(self, coll, doc):
        """documentKey: shard key fields in key order, then _id (spec §3.8)."""
        key = self.cl.shard_keys.get("%s.%s" % (self.db, coll))
        if not key:
            return {"_id": doc["_id"]}
        out = {}
        for f in key:
            v = sb.get_field(doc, f)
            out[f] = v
        if "_id" not in out:
            out["_id"] = doc["_id"]
        return out

    # statements ------------------------------------------------------------------
    def insert_one(self, coll, doc):
        c = self.cl.ensure_coll(self.db, coll)
        if "_id" not in doc:
            d2 = {"_id": self.cl.new_oid()}
            d2.update(doc)
            doc = d2
        elif list(doc.keys())[0] != "_id":
            d2 = {"_id": doc["_id"]}
            d2.update((k, v) for k, v in doc.items() if k != "_id")
            doc = d2
        if isinstance(doc["_id"], list):
            raise BadId("can't use an array for _id")
        if isinstance(doc["_id"], (Regex, type(re.compile("")))):
            # MongoDB refuses a regex _id as it does an array (the manual: "any type other
            # than an array or regex")
            raise BadId("can't use a regex for _id")
        key = sb.id_key(doc["_id"])
        if self.get(coll, key) is not None:
            raise DupKey(self.db, coll, doc["_id"])
        doc = copy.deepcopy(doc)
        self._put(c, key, doc)
        entry = {"op": "i", "ns": "%s.%s" % (self.db, coll), "ui": c.uuid, "o": doc}
        if self.cl.wire >= 17:  # o2 on inserts from 5.3 (spec §3.8)
            entry["o2"] = self.doc_key(coll, doc)
        self._log(entry)
        return doc

    def _replace_or_update(self, c, coll, old, new_doc, is_replacement, modifier=False):
        key = sb.id_key(old["_id"])
        if sb.identical(old, new_doc):
            return False
        self._put(c, key, new_doc)
        ns = "%s.%s" % (self.db, coll)
        if is_replacement:
            o = new_doc
        else:
            diff = sb.compute_diff(old, new_doc) or {}
            if self.cl.wire >= 13:
                if modifier:
                    diff = sb.modifier_diff(diff, new_doc)
                o = {"$v": 2, "diff": diff}
            else:
                sets, unsets = sb.diff_to_v1(diff)
                for p in list(sets):
                    if sets[p] is None:
                        sets[p] = sb.get_field(new_doc, p)
                o = {"$v": 1}
                if sets:
                    o["$set"] = sets
                if unsets:
                    o["$unset"] = unsets
        images = (copy.deepcopy(old), copy.deepcopy(new_doc)) if self.cl.wants_images(c) else None
        self._log({"op": "u", "ns": ns, "ui": c.uuid, "o": o, "o2": self.doc_key(coll, old)}, images)
        return True

    def update(self, coll, q, u, upsert=False, multi=False, sort=None, array_filters=None):
        """Returns (n_matched, n_modified, upserted_id or None, new_docs list, old_docs list)."""
        pipeline = u if isinstance(u, list) else None
        is_repl = pipeline is None and not sb.is_operator_update(u)
        if pipeline is not None:
            from simstream import apply_stage
            for st in pipeline:
                if next(iter(st)) not in ("$set", "$addFields", "$unset", "$project", "$replaceRoot", "$replaceWith"):
                    raise SimError(72, "InvalidOptions", "%s is not allowed to be used within an update" % next(iter(st)))
        if is_repl:
            for k in u:
                if k.startswith("$"):
                    raise SimError(9, "FailedToParse", "Unknown modifier: %s" % k)
            if multi:
                raise SimError(9, "FailedToParse", "multi update is not supported for replacement-style update")
        c = self.cl.get_coll(self.db, coll)
        matched = [d for d in self.docs(coll) if sb.matches(d, q)] if c is not None else []
        if sort:
            matched = sb.sort_docs(matched, sort)
        if not multi:
            matched = matched[:1]
        n_mod = 0
        news, olds = [], []
        for old in matched:
            if is_repl:
                new_doc = {"_id": old["_id"]}
                if "_id" in u and not sb.values_equal(u["_id"], old["_id"]):
                    raise SimError(66, "ImmutableField",
                                   "After applying the update, the (immutable) field '_id' was found to have been altered to _id: %r" % (u["_id"],))
                new_doc.update((k, copy.deepcopy(v)) for k, v in u.items() if k != "_id")
            elif pipeline is not None:
                docs = [copy.deepcopy(old)]
                for st in pipeline:
                    docs = apply_stage(st, docs)
                new_doc = docs[0]
                if not sb.values_equal(new_doc.get("_id"), old["_id"]):
                    raise SimError(66, "ImmutableField", "After applying the update, the (immutable) field '_id' was found to have been altered")
                if list(new_doc)[0] != "_id":
                    new_doc = dict([("_id", new_doc["_id"])] + [(k, v) for k, v in new_doc.items() if k != "_id"])
            else:
                new_doc = sb.apply_update(old, u, query=q, array_filters=array_filters)
            as_replacement = is_repl
            if pipeline is not None:
                # pipeline updates are logged as a diff unless the diff is larger than the new
                # document, then as a replacement (a `replace` event, spec §3.7)
                diff = sb.compute_diff(old, new_doc) or {}
                as_replacement = self.cl.wire >= 13 and len(sb.encode({"d": diff})) > len(sb.encode(new_doc))
            if self._replace_or_update(c, coll, old, new_doc, as_replacement,
                                       modifier=pipeline is None and not is_repl):
                n_mod += 1
            news.append(new_doc)
            olds.append(old)
        if matched or not upsert:
            return len(matched), n_mod, None, news, olds
        base = {}
        for k, v in q.items():
            if k.startswith("$"):
                if k == "$and":
                    for sub in v:
                        for k2, v2 in sub.items():
                            if not k2.startswith("$") and not (isinstance(v2, dict) and any(x.startswith("$") for x in v2)):
                                sb.set_path(base, k2, copy.deepcopy(v2))
                continue
            if isinstance(v, dict) and v and all(x.startswith("$") for x in v):
                if "$eq" in v:
                    sb.set_path(base, k, copy.deepcopy(v["$eq"]))
                continue
            sb.set_path(base, k, copy.deepcopy(v))
        if pipeline is not None:
            docs = [base]
            for st in pipeline:
                docs = apply_stage(st, docs)
            doc = docs[0]
        elif is_repl:
            doc = {}
            if "_id" in base:
                doc["_id"] = base["_id"]
            doc.update(copy.deepcopy(u))
        else:
            doc = sb.apply_update(base, u, is_upsert_insert=True)
        doc = self.insert_one(coll, doc)
        return 0, 0, doc["_id"], [doc], []

    def delete(self, coll, q, limit=0, sort=None):
        c = self.cl.get_coll(self.db, coll)
        if c is None:
            return []
        matched = [d for d in self.docs(coll) if sb.matches(d, q)]
        if sort:
            matched = sb.sort_docs(matched, sort)
        if limit:
            matched = matched[:1]
        if self.txn is None and not limit and len(matched) > 1 and self.cl.wire >= 18:
            # 6.1+: a multi-delete is logged as one applyOps without lsid (spec §5.4)
            ops, imgs = [], []
            for d in matched:
                self._put(c, sb.id_key(d["_id"]), None)
                ops.append({"op": "d", "ns": "%s.%s" % (self.db, coll), "ui": c.uuid, "o": self.doc_key(coll, d)})
                imgs.append((copy.deepcopy(d), None) if self.cl.wants_images(c) else None)
            e = self.cl.append_entry({"op": "c", "ns": "admin.$cmd", "o": {"applyOps": ops}})
            self.last_op_ts = e["ts"]
            self.cl.record_undo(e["ts"], self._undo)
            self._undo = []
            for i, img in enumerate(imgs):
                if img is not None:
                    self.cl.oplog.images[(sb.ts_key(e["ts"]), i)] = img
            return matched
        for d in matched:
            self._put(c, sb.id_key(d["_id"]), None)
            images = (copy.deepcopy(d), None) if self.cl.wants_images(c) else None
            self._log({"op": "d", "ns": "%s.%s" % (self.db, coll), "ui": c.uuid, "o": self.doc_key(coll, d)}, images)
        return matched


class BadId(SimError):
    """An `_id` of a type MongoDB refuses: a per-document write error (code 2), as
    MongoDB's insert reports it in writeErrors, not a failed command."""

    def __init__(self, msg):
        SimError.__init__(self, 2, "BadValue", msg)


class DupKey(SimError):
    def __init__(self, db, coll, idv):
        SimError.__init__(self, 11000, "DuplicateKey",
                          "E11000 duplicate key error collection: %s.%s index: _id_ dup key: { _id: %s }"
                          % (db, coll, _shell_repr(idv)))
        self.key_value = idv


def _shell_repr(v):
    if isinstance(v, str):
        return '"%s"' % v
    if isinstance(v, ObjectId):
        return 'ObjectId(\'%s\')' % v
    return repr(v)


def commit_txn(cl, lsid, txn):
    """Apply a transaction's overlay and log it as one applyOps entry (spec §5.4)."""
    if not txn.ops:
        return None
    undo = []
    for (db, coll, key), doc in txn.overlay.items():
        c = cl.get_coll(db, coll) or cl.ensure_coll(db, coll)
        undo.append((db, coll, key, c.docs.get(key)))
        if doc is None:
            c.docs.pop(key, None)
        else:
            c.docs[key] = doc
    ops = [dict(op) for op in txn.ops]
    per = cl.txn_ops_per_entry or len(ops)
    chunks = [ops[i:i + per] for i in range(0, len(ops), per)]
    prev = {"ts": Timestamp(0, 0), "t": Int64(-1)}
    lsid_doc = {"id": lsid["id"], "uid": EMPTY_UID}
    for n, chunk in enumerate(chunks):
        # a transaction larger than one entry is a chain of applyOps linked by prevOpTime; all
        # but the last carry partialTxn, the last carries the total count (spec §5.4)
        o = {"applyOps": chunk}
        if n < len(chunks) - 1:
            o["partialTxn"] = True
        elif len(chunks) > 1:
            o["count"] = Int64(len(ops))
        e = cl.append_entry({"op": "c", "ns": "admin.$cmd", "o": o, "lsid": lsid_doc,
                             "txnNumber": Int64(txn.number), "prevOpTime": prev})
        prev = {"ts": e["ts"], "t": e["t"]}
    cl.record_undo(e["ts"], undo)
    for i, img in enumerate(txn.images):
        if img is not None:
            cl.oplog.images[(sb.ts_key(e["ts"]), i)] = img
    return e


def prepare_txn(cl, lsid, txn):
    """Participant side of a cross-shard transaction, step 1: log the operations as an
    applyOps entry with prepare: true (nothing visible yet, spec §5.4)."""
    return cl.append_entry({"op": "c", "ns": "admin.$cmd",
                            "o": {"applyOps": [dict(op) for op in txn.ops], "prepare": True},
                            "lsid": {"id": lsid["id"], "uid": EMPTY_UID}, "txnNumber": Int64(txn.number),
                            "prevOpTime": {"ts": Timestamp(0, 0), "t": Int64(-1)}})


def commit_prepared(cl, lsid, txn, prep, commit_ts):
    """Step 2: apply the overlay and log commitTransaction with the coordinator's
    commitTimestamp, linked to the prepare entry by prevOpTime (spec §5.4)."""
    undo = []
    for (db, coll, key), doc in txn.overlay.items():
        c = cl.get_coll(db, coll) or cl.ensure_coll(db, coll)
        undo.append((db, coll, key, c.docs.get(key)))
        if doc is None:
            c.docs.pop(key, None)
        else:
            c.docs[key] = doc
    e = cl.append_entry({"op": "c", "ns": "admin.$cmd",
                         "o": {"commitTransaction": 1, "commitTimestamp": commit_ts},
                         "lsid": {"id": lsid["id"], "uid": EMPTY_UID}, "txnNumber": Int64(txn.number),
                         "prevOpTime": {"ts": prep["ts"], "t": prep["t"]}})
    cl.record_undo(e["ts"], undo)
    for i, img in enumerate(txn.images):
        if img is not None:
            cl.oplog.images[(sb.ts_key(e["ts"]), i)] = img
    return e
