"""Write commands of the MongoDB simulator (mongo-sim-spec.md §1.8, §2): insert,
update, delete, findAndModify, retryable-write de-duplication, and commit / abort of
multi-document transactions. A mixin of simcommands.Dispatcher.
"""

import copy

import simbson as sb
from simbson import SimError
import simserver as ss
from simserver import Writer, DupKey, BadId
from simcursors import ok_reply


class WriteCommands(object):
    """Write, retryable-write and transaction-end handlers."""

    # ------------------------------------------------------------------ writes
    def _retry_check(self, body):
        """Retryable-write de-duplication by (lsid, txnNumber) (spec §1.8)."""
        if body.get("autocommit") is False:
            return None, None
        num = body.get("txnNumber")
        lsid = body.get("lsid")
        if num is None or lsid is None:
            return None, None
        s = self._session(lsid)
        if num < s["txn"]:
            raise SimError(225, "TransactionTooOld",
                           "Retryable write with txnNumber %d is prohibited on session because a newer retryable write with txnNumber %d has already started on this session." % (num, s["txn"]))
        if num == s["txn"] and num in s["replies"]:
            return s, copy.deepcopy(s["replies"][num])
        s["txn"] = int(num)
        return s, None

    def _writer(self, body, db):
        txn = self._txn_for(body)
        return Writer(self.cl, db, txn, body.get("lsid"), body.get("txnNumber"))

    def cmd_insert(self, member, body, conn):
        self._check_primary(member, "insert")
        s, prev = self._retry_check(body)
        if prev is not None:
            return prev
        db, coll = body["$db"], body["insert"]
        ss.check_ns(db, coll)
        w = self._writer(body, db)
        n = 0
        errs = []
        for i, doc in enumerate(body.get("documents", [])):
            w.stmt_id = i
            try:
                w.insert_one(coll, doc)
                n += 1
            except DupKey as e:
                errs.append({"index": i, "code": 11000, "keyPattern": {"_id": 1},
                             "keyValue": {"_id": e.key_value}, "errmsg": e.errmsg})
                if body.get("ordered", True):
                    break
            except BadId as e:
                errs.append({"index": i, "code": e.code, "errmsg": e.errmsg})
                if body.get("ordered", True):
                    break
        r = {"n": n}
        if errs:
            r["writeErrors"] = errs
        r["ok"] = 1.0
        if w.last_op_ts is not None:
            r["__opTime"] = w.last_op_ts
        if s is not None:
            s["replies"][body["txnNumber"]] = r
        return r

    def cmd_update(self, member, body, conn):
        self._check_primary(member, "update")
        s, prev = self._retry_check(body)
        if prev is not None:
            return prev
        db, coll = body["$db"], body["update"]
        ss.check_ns(db, coll)
        w = self._writer(body, db)
        n = nmod = 0
        upserted, errs = [], []
        for i, st in enumerate(body.get("updates", [])):
            w.stmt_id = i
            try:
                m, mod, uid, _, _ = w.update(coll, st.get("q", {}), st.get("u", {}), bool(st.get("upsert")),
                                              bool(st.get("multi")), None, st.get("arrayFilters"))
                n += m
                nmod += mod
                if uid is not None:
                    n += 1
                    upserted.append({"index": i, "_id": uid})
            except SimError as e:
                errs.append({"index": i, "code": e.code, "errmsg": e.errmsg})
                if body.get("ordered", True):
                    break
        r = {"n": n, "nModified": nmod}
        if upserted:
            r["upserted"] = upserted
        if errs:
            r["writeErrors"] = errs
        r["ok"] = 1.0
        if w.last_op_ts is not None:
            r["__opTime"] = w.last_op_ts
        if s is not None:
            s["replies"][body["txnNumber"]] = r
        return r

    def cmd_delete(self, member, body, conn):
        self._check_primary(member, "delete")
        s, prev = self._retry_check(body)
        if prev is not None:
            return prev
        db, coll = body["$db"], body["delete"]
        w = self._writer(body, db)
        n = 0
        for i, st in enumerate(body.get("deletes", [])):
            w.stmt_id = i
            n += len(w.delete(coll, st.get("q", {}), int(st.get("limit", 0))))
        r = {"n": n, "ok": 1.0}
        if w.last_op_ts is not None:
            r["__opTime"] = w.last_op_ts
        if s is not None:
            s["replies"][body["txnNumber"]] = r
        return r

    def cmd_findAndModify(self, member, body, conn):
        self._check_primary(member, "findAndModify")
        s, prev = self._retry_check(body)
        if prev is not None:
            return prev
        db = body["$db"]
        coll = body.get("findAndModify", body.get("findandmodify"))
        w = self._writer(body, db)
        q = body.get("query") or {}
        sort = body.get("sort")
        fields = body.get("fields")
        if body.get("remove"):
            gone = w.delete(coll, q, 1, sort)
            value = gone[0] if gone else None
            leo = {"n": len(gone)}
        else:
            u = body.get("update")
            if u is None:
                raise SimError(9, "FailedToParse", "Either an update or remove=true must be specified")
            m, mod, uid, news, olds = w.update(coll, q, u, bool(body.get("upsert")), False, sort,
                                               body.get("arrayFilters"))
            leo = {"n": 1 if (m or uid is not None) else 0, "updatedExisting": bool(m)}
            if uid is not None:
                leo["upserted"] = uid
            if body.get("new"):
                value = news[0] if news else None
            else:
                value = olds[0] if olds else None
        if value is not None and fields:
            value = sb.project(value, fields)
        r = {"lastErrorObject": leo, "value": value, "ok": 1.0}
        if w.last_op_ts is not None:
            r["__opTime"] = w.last_op_ts
        if s is not None:
            s["replies"][body["txnNumber"]] = r
        return r

    def cmd_commitTransaction(self, member, body, conn):
        self._check_primary(member, "commitTransaction")
        t = self._txn_for(body)
        if t.state == "committed":
            return ok_reply()
        e = ss.commit_txn(self.cl, body["lsid"], t)
        t.state = "committed"
        r = ok_reply()
        if e is not None:
            r["__opTime"] = e["ts"]
        return r

    def cmd_abortTransaction(self, member, body, conn):
        self._check_primary(member, "abortTransaction")
        t = self._txn_for(body)
        t.state = "aborted"
        return ok_reply()
