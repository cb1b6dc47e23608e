"""Command handlers of the MongoDB simulator (mongo-sim-spec.md §1.6.4, §1.7-§1.9, §2, §3, §5).

`Dispatcher.run(member, conn, body)` takes a decoded command body (first key = command name)
and returns the reply body. Every handler runs under the cluster lock; blocking handlers
(awaitable hello, awaitData getMore) wait on the cluster's condition variables.
"""

import time

import simserver as ss
from simbson import SimError
from simcmd_admin import AdminCommands
from simcmd_aggregate import AggregateCommands
from simcmd_catalog import CatalogCommands
from simcmd_read import ReadCommands
from simcmd_write import WriteCommands
# Re-exported: simshard and the tests reach the cursor helpers through this module.
from simcursors import (DEFAULT_BATCH, MAX_BATCH_BYTES, CursorEntry, ListCursor,  # noqa: F401
                        OplogCursor, cursor_reply, ok_reply)

READ_COMMANDS = {"find", "aggregate", "count", "distinct", "listCollections", "listIndexes",
                 "collStats", "dbStats"}
WRITE_COMMANDS = {"insert", "update", "delete", "findAndModify", "create", "drop", "dropDatabase",
                  "renameCollection", "collMod", "createIndexes", "dropIndexes"}


class Dispatcher(AdminCommands, CatalogCommands, WriteCommands, ReadCommands, AggregateCommands):
    """The command handlers of one replica set (or standalone): the shared checks below, the
    handlers in the mixins (simcmd_admin, simcmd_catalog, simcmd_write, simcmd_read,
    simcmd_aggregate)."""

    def __init__(self, cl):
        self.cl = cl

    # ------------------------------------------------------------------ shared checks
    def _check_primary(self, member, name):
        if member.state != "PRIMARY":
            raise SimError(10107, "NotWritablePrimary", "not primary")

    def _check_read(self, member, body):
        if member.state == "PRIMARY":
            return
        rp = body.get("$readPreference")
        mode = rp.get("mode") if isinstance(rp, dict) else None
        if mode in (None, "primary"):
            raise SimError(13435, "NotPrimaryNoSecondaryOk", "not primary and secondaryOk=false")

    def _session(self, lsid):
        key = lsid["id"] if isinstance(lsid, dict) else None
        if key is None:
            return None
        s = self.cl.sessions.get(key)
        if s is None:
            s = {"txn": -1, "replies": {}, "txn_obj": None, "last_used": time.time()}
            self.cl.sessions[key] = s
        s["last_used"] = time.time()
        return s

    def _txn_for(self, body):
        """The open transaction of this command's session, or None for a plain command."""
        if body.get("autocommit") is not False:
            return None
        lsid = body.get("lsid")
        num = body.get("txnNumber")
        if lsid is None or num is None:
            raise SimError(50768, "Location50768", "txnNumber may only be provided for multi-document transactions and retryable write commands")
        s = self._session(lsid)
        if body.get("startTransaction"):
            if num < s["txn"]:
                raise SimError(225, "TransactionTooOld",
                               "Cannot start transaction %d on session because a newer transaction %d has already started." % (num, s["txn"]))
            s["txn"] = int(num)
            s["txn_obj"] = ss.Txn(int(num))
            s["replies"] = {}
        t = s["txn_obj"]
        if t is None or t.number != num or t.state != "in_progress":
            if t is not None and t.number == num and t.state == "committed" and next(iter(body)) == "commitTransaction":
                return t
            raise SimError(251, "NoSuchTransaction", "Transaction %d has been aborted." % num if t and t.number == num
                           else "Given transaction number %d does not match any in-progress transactions." % num,
                           ["TransientTransactionError"])
        return t

    def _register_cursor(self, member, ns, impl, lsid, await_data, is_cs):
        cid = self.cl.new_cursor_id()
        ce = CursorEntry(cid, ns, impl, lsid, await_data, is_cs)
        conn = getattr(self, "cur_conn", None)
        ce.user = getattr(conn, "authenticated", None) if conn is not None else None
        member.cursors[cid] = ce
        return cid
