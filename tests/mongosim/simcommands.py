"""Command handlers of the MongoDB simulator (mongo-sim-spec.md §1.6.4, §1.7-§1.9, §2, §3, §5).

`Dispatcher.run(member, conn, body)` takes a decoded command body (first key = command name)
and returns the reply body. Every handler runs under the cluster lock; blocking handlers
(awaitable hello, awaitData getMore) wait on the cluster's condition variables.
"""

import copy
import functools
import time

import bson
from bson.int64 import Int64
from bson.objectid import ObjectId
from bson.son import SON
from bson.timestamp import Timestamp

import simbson as sb
from simbson import SimError
import simquery
import simrollback
import simserver as ss
from simserver import Writer, DupKey, BadId
from simstream import ChangeStream, apply_stage, eval_expr

READ_COMMANDS = {"find", "aggregate", "count", "distinct", "listCollections", "listIndexes",
                 "collStats", "dbStats"}
WRITE_COMMANDS = {"insert", "update", "delete", "findAndModify", "create", "drop", "dropDatabase",
                  "renameCollection", "collMod", "createIndexes", "dropIndexes"}
DEFAULT_BATCH = 101
AGGREGATE_FIELDS = {"aggregate", "pipeline", "cursor", "explain", "allowDiskUse", "maxTimeMS",
                    "bypassDocumentValidation", "readConcern", "collation", "hint", "comment",
                    "writeConcern", "let", "$db", "lsid", "$clusterTime", "txnNumber", "autocommit",
                    "startTransaction", "$readPreference", "apiVersion", "apiStrict",
                    "apiDeprecationErrors", "readPreference", "$client", "$audit"}
from simcursors import (MAX_BATCH_BYTES, CursorEntry, ListCursor, OplogCursor,  # noqa: F401
                       cursor_reply, ok_reply)


def _name_ok(v, what):
    if not isinstance(v, str) or not v:
        raise SimError(73, "InvalidNamespace", "Invalid %s name" % what)
    return v


class Dispatcher(object):
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

    # ------------------------------------------------------------------ hello
    def hello_reply(self, member, body, name):
        cl = self.cl
        r = {}
        if body.get("helloOk"):
            r["helloOk"] = True
        if getattr(member, "removed", False):
            # a member removed from the config (spec §2.3 last example): RSGhost for clients
            r["topologyVersion"] = member.topology_version()
            r["isWritablePrimary" if name == "hello" else "ismaster"] = False
            r["secondary"] = False
            r["isreplicaset"] = True
            r["info"] = "Does not have a valid replica set config"
            r.update(maxBsonObjectSize=16777216, maxMessageSizeBytes=48000000, maxWriteBatchSize=100000,
                     localTime=cl.clock.wall_dt(), logicalSessionTimeoutMinutes=30,
                     connectionId=member.conn_counter, minWireVersion=0, maxWireVersion=cl.wire,
                     readOnly=False, ok=1.0)
            return r
        r["topologyVersion"] = member.topology_version()
        r["hosts"] = cl.hosts()
        r["setName"] = cl.set_name
        r["setVersion"] = cl.set_version
        flag = "isWritablePrimary" if name == "hello" else "ismaster"
        r[flag] = member.state == "PRIMARY"
        r["secondary"] = member.state == "SECONDARY"
        p = cl.primary
        if p is not None:
            r["primary"] = p.advertised
        r["me"] = member.advertised
        if getattr(member, "hidden", False):
            r["passive"] = True
            r["hidden"] = True
        if member.state == "PRIMARY":
            r["electionId"] = cl.election_id()
        last = cl.oplog.entries[-1] if cl.oplog.entries else None
        if last is not None and getattr(member, "lag_ms", 0):
            last = cl.oplog.entries[max(0, cl.oplog.index_after(cl.applied_key(member)) - 1)]
        if last is not None:
            opt = {"ts": last["ts"], "t": last["t"]}
            i = max(0, cl.oplog.index_after(min(cl.majority_key(), sb.ts_key(last["ts"]))) - 1)
            maj = cl.oplog.entries[i]
            mopt = {"ts": maj["ts"], "t": maj["t"]}
            r["lastWrite"] = {"opTime": opt, "lastWriteDate": last["wall"],
                              "majorityOpTime": mopt, "majorityWriteDate": maj["wall"]}
        r["maxBsonObjectSize"] = 16777216
        r["maxMessageSizeBytes"] = 48000000
        r["maxWriteBatchSize"] = 100000
        r["localTime"] = cl.clock.wall_dt()
        r["logicalSessionTimeoutMinutes"] = 30
        r["connectionId"] = member.conn_counter
        r["minWireVersion"] = 0
        r["maxWireVersion"] = cl.wire
        r["readOnly"] = False
        if getattr(cl, "configsvr", False):
            r["configsvr"] = 2
        if "saslSupportedMechs" in body and getattr(cl, "users", None):
            user = str(body["saslSupportedMechs"]).split(".", 1)[-1]
            if user in cl.users:
                r["saslSupportedMechs"] = ["SCRAM-SHA-1", "SCRAM-SHA-256"]
        r["ok"] = 1.0
        return r

    def cmd_hello(self, member, body, conn, name="hello"):
        tv = body.get("topologyVersion")
        mat = body.get("maxAwaitTimeMS")
        if (tv is None) != (mat is None):
            raise SimError(9, "FailedToParse", "topologyVersion must be provided if and only if maxAwaitTimeMS is provided")
        if tv is not None:
            if mat < 0:
                raise SimError(2, "BadValue", "maxAwaitTimeMS must be a non-negative integer")
            if tv.get("processId") == member.process_id:
                if tv.get("counter", 0) > member.counter:
                    raise SimError(2, "BadValue", "Received a topology version with the same process ID and a higher counter than the server")
                deadline = time.time() + mat / 1000.0
                while tv.get("counter") == member.counter and tv.get("processId") == member.process_id:
                    rem = deadline - time.time()
                    if rem <= 0 or self.cl.stopping or conn.closed:
                        break
                    self.cl.topo_cond.wait(rem)
        return self.hello_reply(member, body, name)

    # ------------------------------------------------------------------ misc
    def cmd_saslStart(self, member, body, conn):
        import simauth
        if not getattr(self.cl, "users", None):
            raise SimError(334, "MechanismUnavailable", "Authentication is not enabled on this server")
        return simauth.sasl_start(self.cl.users, conn, body)

    def cmd_saslContinue(self, member, body, conn):
        import simauth
        return simauth.sasl_continue(conn, body)

    def cmd_logout(self, member, body, conn):
        conn.authenticated = None
        return ok_reply()

    def cmd_ping(self, member, body, conn):
        return ok_reply()

    def cmd_buildInfo(self, member, body, conn):
        v = ss.FULL_VERSION[self.cl.version]
        parts = [int(x) for x in v.split(".")] + [0]
        return ok_reply(version=v, gitVersion="0" * 40, versionArray=parts[:4], bits=64,
                        maxBsonObjectSize=16777216, storageEngines=["wiredTiger"], debug=False)

    def cmd_serverStatus(self, member, body, conn):
        return ok_reply(host=member.address, version=ss.FULL_VERSION[self.cl.version], process="mongod",
                        pid=Int64(0), uptime=1.0, localTime=self.cl.clock.wall_dt(),
                        connections={"current": len(member.conns)},
                        repl={"setName": self.cl.set_name, "hosts": self.cl.hosts(),
                              "ismaster": member.state == "PRIMARY", "secondary": member.state == "SECONDARY",
                              "me": member.advertised})

    def cmd_replSetGetStatus(self, member, body, conn):
        cl = self.cl
        last = cl.oplog.entries[-1]
        opt = {"ts": last["ts"], "t": last["t"]}
        ms = []
        for m in cl.members:
            st = m.state if m.reachable else "(not reachable/healthy)"
            ms.append({"_id": m.idx, "name": m.advertised, "health": 1.0 if m.reachable else 0.0,
                       "state": {"PRIMARY": 1, "SECONDARY": 2}.get(m.state, 8) if m.reachable else 8,
                       "stateStr": st, "optime": opt, "optimeDate": last["wall"], "self": m is member})
        return ok_reply(set=cl.set_name, date=cl.clock.wall_dt(), myState=1 if member.state == "PRIMARY" else 2,
                        term=Int64(cl.term), optimes={"lastCommittedOpTime": opt, "appliedOpTime": opt,
                                                      "durableOpTime": opt}, members=ms)

    def cmd_endSessions(self, member, body, conn):
        for s in body.get("endSessions") or []:
            self.cl.sessions.pop(s.get("id"), None)
        return ok_reply()

    def cmd_getParameter(self, member, body, conn):
        return ok_reply(featureCompatibilityVersion={"version": self.cl.version})

    def cmd_getCmdLineOpts(self, member, body, conn):
        return ok_reply(argv=["mongod"], parsed={"replication": {"replSet": self.cl.set_name}})

    def cmd_connectionStatus(self, member, body, conn):
        import simauth
        return ok_reply(authInfo=simauth.connection_status(self.cl, conn))

    # users and roles (simauth.py)
    def cmd_createUser(self, member, body, conn):
        import simauth
        return simauth.create_user(self.cl, body)

    def cmd_dropUser(self, member, body, conn):
        import simauth
        return simauth.drop_user(self.cl, body)

    def cmd_grantRolesToUser(self, member, body, conn):
        import simauth
        return simauth.grant_roles(self.cl, body, True)

    def cmd_revokeRolesFromUser(self, member, body, conn):
        import simauth
        return simauth.grant_roles(self.cl, body, False)

    def cmd_usersInfo(self, member, body, conn):
        import simauth
        return simauth.users_info(self.cl, body)

    def cmd_listDatabases(self, member, body, conn):
        cl = self.cl
        names = set(n for n, colls in cl.store.items() if colls)
        names.update(["admin", "config", "local"])
        dbs = []
        total = 0
        for n in sorted(names):
            if n == "local":
                size = cl.oplog.total
            else:
                size = sum(len(c.docs) for c in cl.store.get(n, {}).values()) * 256
            total += size
            if body.get("nameOnly"):
                dbs.append({"name": n})
            else:
                dbs.append({"name": n, "sizeOnDisk": Int64(size or 8192), "empty": False})
        flt = body.get("filter")
        if flt:
            dbs = [d for d in dbs if sb.matches(d, flt)]
        import simauth
        dbs = simauth.filter_databases(cl, conn, body, dbs)
        if body.get("nameOnly"):
            return ok_reply(databases=dbs)
        return ok_reply(databases=dbs, totalSize=Int64(total), totalSizeMb=Int64(total // 1048576))

    def _coll_infos(self, db, name_only):
        cl = self.cl
        out = []
        if db == "local":
            out.append({"name": "oplog.rs", "type": "collection"} if name_only else
                       {"name": "oplog.rs", "type": "collection",
                        "options": {"capped": True, "size": Int64(cl.oplog.cap or 990 * 1048576)},
                        "info": {"readOnly": False}})
        for name, c in sorted(cl.store.get(db, {}).items()):
            if name_only:
                out.append({"name": name, "type": "collection"})
            else:
                opts = {k: v for k, v in c.options.items() if not k.startswith("__")}
                if cl.pre_images_all and "changeStreamPreAndPostImages" not in opts:
                    # --pre-images: as if every collection had been created with the option
                    opts["changeStreamPreAndPostImages"] = {"enabled": True}
                out.append({"name": name, "type": "collection", "options": opts,
                            "info": {"readOnly": False, "uuid": c.uuid},
                            "idIndex": {"v": 2, "key": {"_id": 1}, "name": "_id_"}})
        return out

    def cmd_listCollections(self, member, body, conn):
        db = body["$db"]
        out = self._coll_infos(db, bool(body.get("nameOnly")))
        if body.get("authorizedCollections") and body.get("nameOnly"):
            import simauth
            out = simauth.filter_collections(self.cl, conn, body, out)
        flt = body.get("filter")
        if flt:
            out = [d for d in out if sb.matches(d, flt)]
        return cursor_reply(True, out, 0, "%s.$cmd.listCollections" % db)

    def cmd_listIndexes(self, member, body, conn):
        db, coll = body["$db"], body["listIndexes"]
        c = self.cl.get_coll(db, coll)
        if c is None:
            raise SimError(26, "NamespaceNotFound", "ns does not exist: %s.%s" % (db, coll))
        idx = [{"v": 2, "key": {"_id": 1}, "name": "_id_"}] + list(c.options.get("__indexes", []))
        return cursor_reply(True, idx, 0, "%s.%s" % (db, coll))

    # ------------------------------------------------------------------ DDL
    def cmd_create(self, member, body, conn):
        db, coll = body["$db"], _name_ok(body["create"], "collection")
        if self.cl.get_coll(db, coll) is not None:
            raise SimError(48, "NamespaceExists", "Collection %s.%s already exists." % (db, coll))
        opts = {k: v for k, v in body.items() if k not in ("create", "$db", "lsid", "$clusterTime", "txnNumber",
                                                         "writeConcern", "$readPreference", "autocommit",
                                                         "startTransaction", "comment")}
        self.cl.ensure_coll(db, coll, opts)
        return ok_reply()

    def cmd_drop(self, member, body, conn):
        db, coll = body["$db"], body["drop"]
        c = self.cl.get_coll(db, coll)
        if c is None:
            if self.cl.wire >= 21:
                return ok_reply(nIndexesWas=0, ns="%s.%s" % (db, coll))
            raise SimError(26, "NamespaceNotFound", "ns not found")
        self._drop(db, coll)
        return ok_reply(nIndexesWas=1, ns="%s.%s" % (db, coll))

    def _drop(self, db, coll):
        cl = self.cl
        c = cl.store[db].pop(coll)
        cl.append_entry({"op": "c", "ns": db + ".$cmd", "ui": c.uuid, "o": {"drop": coll},
                         "o2": {"numRecords": len(c.docs)}})

    def cmd_dropDatabase(self, member, body, conn):
        db = body["$db"]
        cl = self.cl
        for coll in list(cl.store.get(db, {}).keys()):
            self._drop(db, coll)
        cl.store.pop(db, None)
        cl.append_entry({"op": "c", "ns": db + ".$cmd", "o": {"dropDatabase": 1}})
        return ok_reply(dropped=db)

    def cmd_renameCollection(self, member, body, conn):
        cl = self.cl
        if body["$db"] != "admin":
            raise SimError(13, "Unauthorized", "renameCollection may only be run against the admin database.")
        src, dst = body["renameCollection"], body["to"]
        sdb, scoll = src.split(".", 1)
        ddb, dcoll = dst.split(".", 1)
        c = cl.get_coll(sdb, scoll)
        if c is None:
            raise SimError(26, "NamespaceNotFound", "Source collection %s does not exist" % src)
        target = cl.get_coll(ddb, dcoll)
        o = {"renameCollection": src, "to": dst, "stayTemp": bool(body.get("stayTemp", False))}
        if target is not None:
            if not body.get("dropTarget"):
                raise SimError(48, "NamespaceExists", "target namespace exists")
            o["dropTarget"] = target.uuid
        del cl.store[sdb][scoll]
        c.name = dcoll
        cl.store.setdefault(ddb, {})[dcoll] = c
        cl.append_entry({"op": "c", "ns": sdb + ".$cmd", "ui": c.uuid, "o": o})
        return ok_reply()

    def cmd_collMod(self, member, body, conn):
        db, coll = body["$db"], body["collMod"]
        c = self.cl.get_coll(db, coll)
        if c is None:
            raise SimError(26, "NamespaceNotFound", "ns does not exist")
        o = {"collMod": coll}
        old = {"uuid": c.uuid}
        old.update({k: v for k, v in c.options.items() if not k.startswith("__")})
        for k, v in body.items():
            if k in ("collMod", "$db", "lsid", "$clusterTime", "writeConcern", "$readPreference", "comment"):
                continue
            if k == "changeStreamPreAndPostImages" and self.cl.wire < 17:
                raise SimError(40415, "IDLUnknownField", "BSON field 'collMod.%s' is an unknown field." % k)
            c.options[k] = v
            o[k] = v
        self.cl.append_entry({"op": "c", "ns": db + ".$cmd", "ui": c.uuid, "o": o,
                              "o2": {"collectionOptions_old": old}})
        return ok_reply()

    def cmd_createIndexes(self, member, body, conn):
        db, coll = body["$db"], body["createIndexes"]
        c = self.cl.ensure_coll(db, coll)
        idx = c.options.setdefault("__indexes", [])
        before = len(idx) + 1
        for spec in body.get("indexes", []):
            if spec.get("name") == "_id_" or any(i["name"] == spec.get("name") for i in idx):
                continue
            s = {"v": 2}
            s.update(spec)
            idx.append(s)
            o = {"createIndexes": coll}
            o.update(s)
            self.cl.append_entry({"op": "c", "ns": db + ".$cmd", "ui": c.uuid, "o": o})
        return ok_reply(numIndexesBefore=before, numIndexesAfter=len(idx) + 1, createdCollectionAutomatically=False)

    def cmd_dropIndexes(self, member, body, conn):
        db, coll = body["$db"], body["dropIndexes"]
        c = self.cl.get_coll(db, coll)
        if c is None:
            raise SimError(26, "NamespaceNotFound", "ns not found")
        idx = c.options.get("__indexes", [])
        want = body.get("index")
        keep = [i for i in idx if not (want == "*" or i["name"] == want or i["key"] == want)]
        if want != "*" and len(keep) == len(idx):
            raise SimError(27, "IndexNotFound", "index not found with name [%s]" % (want,))
        c.options["__indexes"] = keep
        for spec in idx:
            if spec not in keep:
                self.cl.append_entry({"op": "c", "ns": db + ".$cmd", "ui": c.uuid,
                                      "o": {"dropIndexes": coll, "index": spec["name"]}, "o2": dict(spec)})
        return ok_reply(nIndexesWas=len(idx) + 1)

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

    # ------------------------------------------------------------------ aggregate
    def cmd_aggregate(self, member, body, conn):
        db = body["$db"]
        target = body["aggregate"]
        pipeline = body.get("pipeline")
        if not isinstance(pipeline, list):
            raise SimError(14, "TypeMismatch", "'pipeline' option must be specified as an array")
        simquery.check_regex_limits(pipeline)
        for k in body:
            if k not in AGGREGATE_FIELDS:
                if self.cl.wire >= 13:
                    raise SimError(40415, "IDLUnknownField", "BSON field 'aggregate.%s' is an unknown field." % k)
                raise SimError(9, "FailedToParse", "unrecognized field '%s'" % k)
        cur_opts = body.get("cursor")
        if cur_opts is None and not body.get("explain"):
            raise SimError(9, "FailedToParse", "The 'cursor' option is required, except for aggregate with the explain argument")
        bs = (cur_opts or {}).get("batchSize")
        bs = int(bs) if bs is not None else None
        lsid = body.get("lsid")
        if pipeline and "$changeStream" in pipeline[0]:
            return self._change_stream(member, body, db, target, pipeline, bs, lsid)
        for st in pipeline[1:]:
            if "$changeStream" in st:
                raise SimError(40602, "Location40602", "$changeStream is only valid as the first stage in a pipeline.")
        self._check_read(member, body)
        if target == 1:
            raise SimError(73, "InvalidNamespace", "{aggregate: 1} is not valid for '%s' in the simulator" % pipeline[:1])
        ns = "%s.%s" % (db, target)
        rc = body.get("readConcern") or {}
        at = self._snapshot_time(rc) if rc.get("level") == "snapshot" and body.get("autocommit") is None else None
        if db == "local" and target == "oplog.rs":
            docs = list(self.cl.oplog.entries)
        elif at is not None:
            docs = [copy.deepcopy(d) for d in self.cl.snapshot_docs(db, target, at)]
        else:
            src = simrollback.majority_view(self.cl, db, target, rc, body.get("maxTimeMS"))
            if src is None:
                src = self._docs(body, db, target)
            if pipeline and isinstance(pipeline[0].get("$sample"), dict):
                # a leading $sample reads only the sampled documents (WiredTiger's random
                # cursor), so copy only those
                src = list(src)
                src = self.cl.rand.sample(src, min(int(pipeline[0]["$sample"].get("size", 0)), len(src)))
                pipeline = pipeline[1:]
            docs = [copy.deepcopy(d) for d in src]
        docs = self._run_pipeline(docs, pipeline, db, target)
        cur = ListCursor(docs)
        batch, done, _ = cur.next_batch(bs if bs is not None else DEFAULT_BATCH, 0)
        cid = 0 if done else self._register_cursor(member, ns, cur, lsid, False, False)
        return cursor_reply(True, batch, cid, ns, at_cluster_time=at)

    def _run_pipeline(self, docs, pipeline, db, coll):
        for st in pipeline:
            if len(st) != 1:
                raise SimError(40323, "Location40323", "A pipeline stage specification object must contain exactly one field.")
            name, arg = next(iter(st.items()))
            if name == "$sort":
                docs = sb.sort_docs(docs, arg)
            elif name == "$limit":
                docs = docs[:int(arg)]
            elif name == "$skip":
                docs = docs[int(arg):]
            elif name == "$count":
                docs = [{arg: len(docs)}] if docs else []
            elif name == "$group":
                docs = self._group(docs, arg)
            elif name == "$sample":
                n = int(arg.get("size", 0))
                docs = self.cl.rand.sample(docs, min(n, len(docs)))
            elif name == "$collStats":
                c = self.cl.get_coll(db, coll)
                r = {"ns": "%s.%s" % (db, coll), "host": "", "localTime": self.cl.clock.wall_dt()}
                if "count" in arg:
                    r["count"] = len(c.docs) if c else 0
                if "storageStats" in arg:
                    r["storageStats"] = {"count": len(c.docs) if c else 0, "size": 0}
                docs = [r]
            elif name == "$unwind":
                path = arg if isinstance(arg, str) else arg["path"]
                keep_empty = isinstance(arg, dict) and arg.get("preserveNullAndEmptyArrays")
                p = path[1:]
                out = []
                for d in docs:
                    v = sb.get_field(d, p)
                    if isinstance(v, list) and v:
                        for x in v:
                            n = copy.deepcopy(d)
                            sb.set_path(n, p, x)
                            out.append(n)
                    elif keep_empty or (v is not None and not isinstance(v, list)):
                        out.append(d)
                docs = out
            elif name == "$bucketAuto":
                docs = self._bucket_auto(docs, arg)
            else:
                docs = apply_stage(st, docs)
        return docs

    def _group(self, docs, spec):
        groups = []
        index = {}
        for d in docs:
            k = eval_expr(spec["_id"], d)
            ik = sb.id_key(k)
            if ik not in index:
                index[ik] = len(groups)
                groups.append((k, []))
            groups[index[ik]][1].append(d)
        out = []
        for k, members in groups:
            r = {"_id": k}
            for f, acc in spec.items():
                if f == "_id":
                    continue
                op, ex = next(iter(acc.items()))
                vals = [eval_expr(ex, d) for d in members] if op != "$count" else []
                if op == "$sum":
                    nums = [v for v in vals if sb.canon(v) == 10]
                    s = 0
                    for v in nums:
                        s = sb._add_nums(s, v)
                    r[f] = s
                elif op == "$count":
                    r[f] = len(members)
                elif op == "$avg":
                    nums = [float(sb._num(v)) for v in vals if sb.canon(v) == 10]
                    r[f] = sum(nums) / len(nums) if nums else None
                elif op in ("$min", "$max"):
                    vs = [v for v in vals if v is not None]
                    if not vs:
                        r[f] = None
                    else:
                        vs.sort(key=functools.cmp_to_key(sb.cmp_values))
                        r[f] = vs[0] if op == "$min" else vs[-1]
                elif op == "$first":
                    r[f] = vals[0] if vals else None
                elif op == "$last":
                    r[f] = vals[-1] if vals else None
                elif op == "$push":
                    r[f] = vals
                elif op == "$addToSet":
                    u = []
                    for v in vals:
                        if not any(sb.values_equal(v, x) for x in u):
                            u.append(v)
                    r[f] = u
                else:
                    raise SimError(15952, "Location15952", "unknown group operator '%s'" % op)
            out.append(r)
        return out

    def _bucket_auto(self, docs, spec):
        """$bucketAuto with the default granularity: sort by groupBy, split into `buckets`
        ranges of near-equal size without splitting equal values; count per bucket."""
        expr = spec["groupBy"]
        nb = int(spec["buckets"])
        vals = sorted(((eval_expr(expr, d), d) for d in docs), key=functools.cmp_to_key(lambda a, b: sb.cmp_values(a[0], b[0])))
        if not vals:
            return []
        per = max(1, -(-len(vals) // nb))
        out = []
        i = 0
        while i < len(vals):
            j = min(i + per, len(vals))
            while j < len(vals) and sb.values_equal(vals[j][0], vals[j - 1][0]):
                j += 1
            chunk = vals[i:j]
            maxv = vals[j][0] if j < len(vals) else chunk[-1][0]
            out.append({"_id": {"min": chunk[0][0], "max": maxv}, "count": len(chunk)})
            i = j
        return out

    def _change_stream(self, member, body, db, target, pipeline, bs, lsid):
        cl = self.cl
        spec = pipeline[0]["$changeStream"]
        if not isinstance(spec, dict):
            raise SimError(50808, "Location50808", "$changeStream stage expects a document as argument")
        self._check_read(member, body)
        if target == 1:
            if spec.get("allChangesForCluster"):
                if db != "admin":
                    raise SimError(
                        73, "InvalidNamespace", "A $changeStream with 'allChangesForCluster:true' may only be opened on the 'admin' database, and with no collection name; found %s.$cmd.aggregate" % db)
                level, coll = "cluster", None
            else:
                if db in ("admin", "config", "local"):
                    raise SimError(73, "InvalidNamespace",
                                   "$changeStream may not be opened on the internal %s database" % db)
                level, coll = "database", None
            ns = "%s.$cmd.aggregate" % db
        else:
            if spec.get("allChangesForCluster"):
                raise SimError(73, "InvalidNamespace", "A $changeStream with 'allChangesForCluster:true' may only be opened on the 'admin' database, and with no collection name; found %s.%s" % (db, target))
            if db in ("admin", "config", "local"):
                raise SimError(73, "InvalidNamespace",
                               "$changeStream may not be opened on the internal %s database" % db)
            if target.startswith("system."):
                raise SimError(73, "InvalidNamespace", "$changeStream may not be opened on the internal %s.%s collection" % (db, target))
            level, coll = "collection", target
            ns = "%s.%s" % (db, target)
        cs = ChangeStream(cl, member, level, db, coll, spec, pipeline[1:])
        batch, closed, pbrt = cs.next_batch(bs if bs is not None else DEFAULT_BATCH, 0)
        cid = 0 if closed else self._register_cursor(member, ns, cs, lsid, True, True)
        return cursor_reply(True, batch, cid, ns, pbrt)

    # ------------------------------------------------------------------ admin / faults
    def cmd_replSetStepDown(self, member, body, conn):
        if member.state != "PRIMARY":
            raise SimError(10107, "NotWritablePrimary", "not primary so can't step down")
        self.cl.step_down(elect="next", no_primary_ms=int(body.get("__electAfterMS", 0)))
        return ok_reply()

    def cmd_replSetFreeze(self, member, body, conn):
        return ok_reply()

    def cmd_replSetStepUp(self, member, body, conn):
        self.cl.elect(member.idx)
        return ok_reply()

    def cmd_replSetResizeOplog(self, member, body, conn):
        size = body.get("size")
        if size is not None:
            if size < 990:
                raise SimError(2, "BadValue", "Oplog size should be 990MB at minimum")
            self.cl.oplog.cap = int(float(size) * 1024 * 1024)
        return ok_reply()

    def cmd_appendOplogNote(self, member, body, conn):
        self._check_primary(member, "appendOplogNote")
        self.cl.append_entry({"op": "n", "ns": "", "o": body.get("data", {})})
        return ok_reply()

    def cmd_configureFailPoint(self, member, body, conn):
        name = body["configureFailPoint"]
        if name != "failCommand":
            raise SimError(2, "BadValue", "Cannot find failpoint named %s" % name)
        mode = body.get("mode")
        data = body.get("data") or {}
        self.cl.fail_rules = [r for r in self.cl.fail_rules if not getattr(r, "wire_fp", False)]
        if mode == "off":
            return ok_reply(count=0)
        spec = dict(data)
        if isinstance(mode, dict):
            if "times" in mode:
                spec["times"] = int(mode["times"])
            if "skip" in mode:
                spec["skip"] = int(mode["skip"])
        elif mode != "alwaysOn":
            raise SimError(2, "BadValue", "unknown mode %r" % (mode,))
        r = ss.FailRule(spec)
        r.wire_fp = True
        self.cl.fail_rules.append(r)
        return ok_reply(count=0)
