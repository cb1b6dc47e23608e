"""Commands as the simulator's mongos answers them (mongo-sim-spec.md §6): hello as a router,
sharding administration, namespace commands forwarded to the primary shard, writes routed
by shard key, reads gathered from the shards, transactions across shards and merged change
streams. Unknown commands fall back to the replica-set Dispatcher or CommandNotFound.
"""

import collections

from bson.int64 import Int64

import simbson as sb
from simbson import SimError
import simserver as ss
from simcommands import Dispatcher
from simcursors import DEFAULT_BATCH, cursor_reply, ok_reply
from simmerged import MergedStream


class RouterTxn(object):
    """A transaction through mongos: a simserver.Txn per participant shard."""

    def __init__(self, number):
        self.number = number
        self.state = "in_progress"
        self.parts = collections.OrderedDict()

    def part(self, shard_name):
        t = self.parts.get(shard_name)
        if t is None:
            t = self.parts[shard_name] = ss.Txn(self.number)
        return t


class MongosDispatcher(Dispatcher):
    """Commands as a mongos answers them; unknown ones fall back to CommandNotFound."""

    def hello_reply(self, member, body, name):
        r = {}
        if body.get("helloOk"):
            r["helloOk"] = True
        flag = "isWritablePrimary" if name == "hello" else "ismaster"
        r[flag] = True
        r["msg"] = "isdbgrid"
        r["topologyVersion"] = member.topology_version()
        r["maxBsonObjectSize"] = 16777216
        r["maxMessageSizeBytes"] = 48000000
        r["maxWriteBatchSize"] = 100000
        r["localTime"] = self.cl.clock.wall_dt()
        r["logicalSessionTimeoutMinutes"] = 30
        r["connectionId"] = member.conn_counter
        r["maxWireVersion"] = self.cl.wire
        r["minWireVersion"] = 0
        r["ok"] = 1.0
        return r

    def _check_read(self, member, body):
        return None

    def _check_primary(self, member, name):
        return None

    def _txn_for(self, body):
        """The session's transaction through mongos: one Txn per participant shard."""
        if body.get("autocommit") is not False:
            return None
        lsid, num = body.get("lsid"), body.get("txnNumber")
        if lsid is None or num is None:
            raise SimError(50768, "Location50768", "txnNumber may only be provided for multi-document transactions and retryable write commands")
        s = self._session(lsid)
        if body.get("startTransaction"):
            if num < s["txn"]:
                raise SimError(225, "TransactionTooOld", "a newer transaction %d has already started" % s["txn"])
            s["txn"] = int(num)
            s["txn_obj"] = RouterTxn(int(num))
        t = s["txn_obj"]
        if t is None or t.number != num or t.state not in ("in_progress",) and next(iter(body)) != "commitTransaction":
            raise SimError(251, "NoSuchTransaction", "Given transaction number %d does not match any in-progress transactions." % num,
                           ["TransientTransactionError"])
        return t

    def _writer(self, c, db, body):
        t = self._txn_for(body)
        if t is None:
            return ss.Writer(c, db, None)
        return ss.Writer(c, db, t.part(c.set_name))

    def cmd_commitTransaction(self, member, body, conn):
        """One participant: an ordinary applyOps commit. Several: two-phase commit, each shard
        logs a prepare entry, then commitTransaction with commitTimestamp = the latest prepare
        time (spec §5.4, §6.5 item 5)."""
        t = self._txn_for(body)
        if t.state == "committed":
            return ok_reply()
        if t.state == "aborted":
            raise SimError(251, "NoSuchTransaction", "Transaction %d has been aborted." % t.number, ["TransientTransactionError"])
        r = self.cl
        lsid = body["lsid"]
        parts = [(r.shard_cl(n), p) for n, p in t.parts.items() if p.ops]
        last = None
        if len(parts) == 1:
            c, p = parts[0]
            r.primary_of(c)
            last = ss.commit_txn(c, lsid, p)
        elif parts:
            for c, _ in parts:
                r.primary_of(c)
            preps = [(c, p, ss.prepare_txn(c, lsid, p)) for c, p in parts]
            commit_ts = max((e["ts"] for _, _, e in preps), key=sb.ts_key)
            for c, p, e in preps:
                last = ss.commit_prepared(c, lsid, p, e, commit_ts)
        t.state = "committed"
        out = ok_reply()
        if last is not None:
            out["__opTime"] = last["ts"]
        return out

    def cmd_abortTransaction(self, member, body, conn):
        t = self._txn_for(body)
        t.state = "aborted"
        return ok_reply()

    # ---- topology commands ----------------------------------------------------------
    def cmd_serverStatus(self, member, body, conn):
        r = self.cl
        cfg = r.config
        last = cfg.oplog.entries[-1]
        return ok_reply(host=member.address, version=ss.FULL_VERSION[r.version], process="mongos",
                        localTime=r.clock.wall_dt(), connections={"current": len(member.conns)},
                        sharding={"configsvrConnectionString": r.conn_string(cfg),
                                  "lastSeenConfigServerOpTime": {"ts": last["ts"], "t": last["t"]},
                                  "maxChunkSizeInBytes": Int64(128 * 1024 * 1024)})

    def cmd_listShards(self, member, body, conn):
        return ok_reply(shards=self.cl.shard_docs())

    def cmd_getShardMap(self, member, body, conn):
        r = self.cl
        m, hosts, cs = {}, {}, {}
        for c in [r.config] + list(r.shards.values()):
            name = "config" if c is r.config else c.set_name
            s = r.conn_string(c)
            m[name] = s
            cs[s] = name
            for x in c.members:
                hosts[x.address] = name
        return ok_reply(map=m, hosts=hosts, connStrings=cs)

    def cmd_enableSharding(self, member, body, conn):
        self.cl.db_primary(body["enableSharding"], create=True)
        return ok_reply()

    def cmd_shardCollection(self, member, body, conn):
        r = self.cl.shard_collection(body["shardCollection"], body["key"], bool(body.get("unique")))
        return ok_reply(**r)

    def cmd_split(self, member, body, conn):
        self.cl.split(body["split"], body["middle"])
        return ok_reply()

    def cmd_moveChunk(self, member, body, conn):
        return ok_reply(**self.cl.move_chunk(body["moveChunk"], body["find"], body["to"]))

    def cmd_mergeChunks(self, member, body, conn):
        b = body.get("bounds") or []
        if len(b) != 2:
            raise SimError(2, "BadValue", "bounds must be [min, max]")
        return ok_reply(**self.cl.merge_chunks(body["mergeChunks"], b[0], b[1]))

    def cmd_addShard(self, member, body, conn):
        raise SimError(2, "BadValue", "use the control API 'add_shard' to start a new shard replica set")

    def cmd_removeShard(self, member, body, conn):
        return ok_reply(**self.cl.remove_shard(body["removeShard"]))

    # ---- namespaces -----------------------------------------------------------------
    def _sub(self, c):
        """A plain Dispatcher on a shard (or the config server) for delegated commands."""
        return Dispatcher(c)

    def _on_primary(self, shard_name, name, body):
        c = self.cl.shard_cl(shard_name)
        p = self.cl.primary_of(c)
        return getattr(self._sub(c), "cmd_" + name)(p, body, None)

    def cmd_listDatabases(self, member, body, conn):
        r = self.cl
        names = {"admin", "config"}
        for c in r.shards.values():
            names.update(n for n, colls in c.store.items() if colls and n not in ("admin", "local"))
        dbs = [{"name": n} if body.get("nameOnly") else {"name": n, "sizeOnDisk": Int64(8192), "empty": False}
               for n in sorted(names)]
        import simauth
        dbs = simauth.filter_databases(r, conn, body, dbs)
        if body.get("nameOnly"):
            return ok_reply(databases=dbs)
        return ok_reply(databases=dbs, totalSize=Int64(8192 * len(dbs)), totalSizeMb=Int64(0))

    def _config_read(self, body, db):
        c = self.cl.config
        return self._sub(c), (c.primary or c.members[0])

    def cmd_listCollections(self, member, body, conn):
        db = body["$db"]
        if db == "config":
            d, m = self._config_read(body, db)
            return d.cmd_listCollections(m, body, None)
        seen = {}
        for c in self.cl.shards.values():
            for info in Dispatcher(c)._coll_infos(db, bool(body.get("nameOnly"))):
                if db == "local":
                    continue
                seen.setdefault(info["name"], info)
        out = [seen[k] for k in sorted(seen)]
        flt = body.get("filter")
        if flt:
            out = [d for d in out if sb.matches(d, flt)]
        return cursor_reply(True, out, 0, "%s.$cmd.listCollections" % db)

    def cmd_create(self, member, body, conn):
        return self._on_primary(self.cl.db_primary(body["$db"], create=True), "create", body)

    def cmd_drop(self, member, body, conn):
        r = self.cl
        db, coll = body["$db"], body["drop"]
        ns = "%s.%s" % (db, coll)
        found = False
        for name, c in r.shards.items():
            if c.get_coll(db, coll) is not None:
                self._on_primary(name, "drop", body)
                found = True
        if r.coll_meta(ns) is not None:
            cfg = r._cfg()
            meta = r.coll_meta(ns)
            if r.wire >= 13:
                cfg.delete("chunks", {"uuid": meta["uuid"]}, 0)
            else:
                cfg.delete("chunks", {"ns": ns}, 0)
            cfg.delete("collections", {"_id": ns}, 1)
            r.shard_keys.pop(ns, None)
        if not found and r.wire < 21:
            raise SimError(26, "NamespaceNotFound", "ns not found")
        return ok_reply(ns=ns, nIndexesWas=1)

    def cmd_dropDatabase(self, member, body, conn):
        r = self.cl
        db = body["$db"]
        for coll in {n for c in r.shards.values() for n in c.store.get(db, {})}:
            self.cmd_drop(member, {"drop": coll, "$db": db}, conn)
        for name, c in r.shards.items():
            if db in c.store or name == r.db_primary(db):
                if c.primary is not None:
                    Dispatcher(c).cmd_dropDatabase(c.primary, {"dropDatabase": 1, "$db": db}, None)
        r._cfg().delete("databases", {"_id": db}, 1)
        return ok_reply(dropped=db)

    def cmd_collMod(self, member, body, conn):
        out = None
        for name, c in self.cl.shards.items():
            if c.get_coll(body["$db"], body["collMod"]) is not None:
                out = self._on_primary(name, "collMod", body)
        if out is None:
            raise SimError(26, "NamespaceNotFound", "ns does not exist")
        return out

    def cmd_createIndexes(self, member, body, conn):
        out = None
        for name in self.cl.shards_for(body["$db"], body["createIndexes"]):
            out = self._on_primary(name, "createIndexes", body)
        return out

    def cmd_renameCollection(self, member, body, conn):
        src = body["renameCollection"]
        if src in self.cl.shard_keys:
            raise SimError(20, "IllegalOperation", "cannot rename a sharded collection")
        db = src.split(".", 1)[0]
        return self._on_primary(self.cl.db_primary(db), "renameCollection", body)

    # ---- writes -----------------------------------------------------------------------
    def _target_insert(self, db, coll, doc):
        ns = "%s.%s" % (db, coll)
        pattern = self.cl.shard_keys.get(ns)
        if not pattern:
            return self.cl.db_primary(db, create=True)
        return self.cl.chunk_for(ns, self.cl.key_of(doc, pattern))["shard"]

    def cmd_insert(self, member, body, conn):
        s, prev = self._retry_check(body)
        if prev is not None:
            return prev
        db, coll = body["$db"], body["insert"]
        ss.check_ns(db, coll)
        r = self.cl
        n = 0
        errs = []
        last = None
        for i, doc in enumerate(body.get("documents", [])):
            name = self._target_insert(db, coll, doc)
            c = r.shard_cl(name)
            r.primary_of(c)
            w = self._writer(c, db, body)
            try:
                w.insert_one(coll, doc)
                n += 1
                last = w.last_op_ts
            except ss.DupKey as e:
                errs.append({"index": i, "code": 11000, "keyPattern": {"_id": 1},
                             "keyValue": {"_id": e.key_value}, "errmsg": e.errmsg})
                if body.get("ordered", True):
                    break
        out = {"n": n}
        if errs:
            out["writeErrors"] = errs
        out["ok"] = 1.0
        if last is not None:
            out["__opTime"] = last
        if s is not None:
            s["replies"][body["txnNumber"]] = out
        return out

    def cmd_update(self, member, body, conn):
        s, prev = self._retry_check(body)
        if prev is not None:
            return prev
        db, coll = body["$db"], body["update"]
        r = self.cl
        n = nmod = 0
        upserted, errs = [], []
        for i, st in enumerate(body.get("updates", [])):
            q, u = st.get("q", {}), st.get("u", {})
            multi, upsert = bool(st.get("multi")), bool(st.get("upsert"))
            try:
                done = False
                for name in r.shards_for(db, coll, q):
                    c = r.shard_cl(name)
                    r.primary_of(c)
                    m, mod, uid, _, _ = self._writer(c, db, body).update(coll, q, u, False, multi, None, st.get("arrayFilters"))
                    n += m
                    nmod += mod
                    if m and not multi:
                        done = True
                        break
                if not done and n == 0 and upsert:
                    base = {k: v for k, v in q.items() if not k.startswith("$") and not isinstance(v, dict)}
                    name = self._target_insert(db, coll, base)
                    c = r.shard_cl(name)
                    m, mod, uid, _, _ = self._writer(c, db, body).update(coll, q, u, True, multi, None, st.get("arrayFilters"))
                    if uid is not None:
                        n += 1
                        upserted.append({"index": i, "_id": uid})
            except SimError as e:
                errs.append({"index": i, "code": e.code, "errmsg": e.errmsg})
                if body.get("ordered", True):
                    break
        out = {"n": n, "nModified": nmod}
        if upserted:
            out["upserted"] = upserted
        if errs:
            out["writeErrors"] = errs
        out["ok"] = 1.0
        if s is not None:
            s["replies"][body["txnNumber"]] = out
        return out

    def cmd_delete(self, member, body, conn):
        s, prev = self._retry_check(body)
        if prev is not None:
            return prev
        db, coll = body["$db"], body["delete"]
        r = self.cl
        n = 0
        for st in body.get("deletes", []):
            limit = int(st.get("limit", 0))
            for name in r.shards_for(db, coll, st.get("q", {})):
                c = r.shard_cl(name)
                r.primary_of(c)
                k = len(self._writer(c, db, body).delete(coll, st.get("q", {}), limit))
                n += k
                if limit and k:
                    break
        out = {"n": n, "ok": 1.0}
        if s is not None:
            s["replies"][body["txnNumber"]] = out
        return out

    def cmd_findAndModify(self, member, body, conn):
        if body.get("autocommit") is False:
            raise SimError(20, "IllegalOperation", "findAndModify inside a transaction through mongos is not supported by the simulator")
        db = body["$db"]
        coll = body.get("findAndModify", body.get("findandmodify"))
        r = self.cl
        q = body.get("query") or {}
        targets = r.shards_for(db, coll, q)
        for name in targets:
            c = r.shard_cl(name)
            if any(sb.matches(d, q) for d in ss.Writer(c, db, None).docs(coll)) or name == targets[-1]:
                return self._on_primary(name, "findAndModify", body)
        return ok_reply(lastErrorObject={"n": 0, "updatedExisting": False}, value=None)

    # ---- reads -------------------------------------------------------------------------
    def _docs(self, body, db, coll):
        r = self.cl
        if db == "config":
            c = r.config.get_coll("config", coll)
            return list(c.docs.values()) if c is not None else []
        if db == "local":
            raise SimError(20, "IllegalOperation", "Can't use 'local' database through mongos")
        out = []
        for name in r.shards_for(db, coll, (body.get("filter") or body.get("query") or {}) if isinstance(body, dict) else None):
            c = r.shard_cl(name)
            out.extend(r.owned_docs(name, db, coll, self._writer(c, db, body).docs(coll)))
        return out

    def cmd_find(self, member, body, conn):
        if body["$db"] == "local":
            raise SimError(20, "IllegalOperation", "Can't use 'local' database through mongos")
        if body.get("tailable"):
            raise SimError(2, "BadValue", "tailable cursors are not supported through mongos on non-capped collections")
        return Dispatcher.cmd_find(self, member, body, conn)

    def cmd_aggregate(self, member, body, conn):
        if body["$db"] == "local":
            raise SimError(20, "IllegalOperation", "Can't use 'local' database through mongos")
        return Dispatcher.cmd_aggregate(self, member, body, conn)

    def _change_stream(self, member, body, db, target, pipeline, bs, lsid):
        spec = pipeline[0]["$changeStream"]
        if target == 1:
            if spec.get("allChangesForCluster"):
                if db != "admin":
                    raise SimError(73, "InvalidNamespace", "A $changeStream with 'allChangesForCluster:true' may only be opened on the 'admin' database")
                level, coll = "cluster", None
            else:
                if db in ("admin", "config", "local"):
                    raise SimError(73, "InvalidNamespace", "$changeStream may not be opened on the internal %s database" % db)
                level, coll = "database", None
            ns = "%s.$cmd.aggregate" % db
        else:
            if db in ("admin", "config", "local"):
                raise SimError(73, "InvalidNamespace", "$changeStream may not be opened on the internal %s database" % db)
            level, coll = "collection", target
            ns = "%s.%s" % (db, target)
        ms = MergedStream(self.cl, level, db, coll, spec, pipeline[1:])
        batch, closed, pbrt = ms.next_batch(bs if bs is not None else DEFAULT_BATCH, 0)
        cid = 0 if closed else self._register_cursor(member, ns, ms, lsid, True, True)
        return cursor_reply(True, batch, cid, ns, pbrt)
