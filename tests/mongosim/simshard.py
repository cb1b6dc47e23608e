"""Sharded topology of the simulator: config server replica set, shard replica sets, mongos
routers (mongo-sim-spec.md §6).

Every replica set is a simserver.Cluster sharing one lock, clock and shard-key table. mongos
routes in-process: writes go to the shard that owns the document's chunk (or the database's
primary shard), reads gather from the shards and finish at the router, and change streams
merge one shard stream per shard by resume token, releasing an event only when every shard's
high-water mark has passed it (§6.4). Sharding metadata lives as ordinary documents in the
config servers' `config` database (config.shards, databases, collections, chunks, mongos),
written through the config replica set's own oplog.

The router's commands are in simmongos (MongosDispatcher), its merged change streams in
simmerged (MergedStream).
"""

import collections
import copy
import functools

from bson.int64 import Int64
from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.objectid import ObjectId
from bson.timestamp import Timestamp

import simbson as sb
import simhash
from simbson import SimError
import simserver as ss
from simmongos import MongosDispatcher

STATE_CODES = {10107, 13435, 13436, 189, 11602, 91, 11600}


class MongosNode(object):
    """One mongos process (same attributes the wire layer uses on a replica-set member)."""

    def __init__(self, idx, host, port=0):
        self.idx = idx
        self.host = host
        self.port = port
        self.state = "MONGOS"
        self.process_id = ObjectId()
        self.counter = 0
        self.cursors = {}
        self.conns = set()
        self.reachable = True
        self.black_hole = False
        self.conn_counter = 0

    @property
    def address(self):
        return "%s:%d" % (self.host, self.port)

    def topology_version(self):
        return {"processId": self.process_id, "counter": Int64(self.counter)}


class Router(object):
    """The mongos tier plus sharding metadata operations. Exposes the attributes the wire
    layer and the generic Dispatcher use on a Cluster (lock, counters, fail rules, ...)."""

    def __init__(self, sim, shared, config_cl, shard_cls, count, version, host="127.0.0.1", seed=None,
                 make_shard=None):
        import random
        self.sim = sim
        self.shared = shared
        self.lock = shared.lock
        self.oplog_cond = shared.oplog_cond
        self.topo_cond = shared.topo_cond
        self.clock = shared.clock
        self.shard_keys = shared.shard_keys
        self.config = config_cl
        self.shards = collections.OrderedDict((c.set_name, c) for c in shard_cls)
        self.version = version
        self.wire = ss.WIRE[version]
        self.rand = random.Random(seed)
        self.counters = collections.Counter()
        self.member_counters = collections.defaultdict(collections.Counter)
        self.fail_rules = []
        self.delays = {}
        self.removed_shards = {}  # name -> cluster of a shard removed (remove_shard), for re-adding
        self.sessions = {}
        self.stopping = False
        self.nodes = [MongosNode(i, host) for i in range(count)]
        self.members = self.nodes
        self.make_shard = make_shard
        self.token_version = 1 if self.wire < 21 else 2
        self.dispatcher = MongosDispatcher(self)
        self.servers = []
        self.oplog = None
        self.configsvr = False
        self.set_name = "mongos"
        self.undo_floor = 0
        # Range deletion after move_chunk: immediate (orphans False) or deferred until
        # clean_orphans (orphans True), as orphanCleanupDelaySecs does on real shards.
        self.orphans = False
        self.pending_deletions = []
        # Chunk history kept on a migration commit (the config server's
        # max(minSnapshotHistoryWindowInSeconds, transactionLifetimeLimitSeconds, 10), 300 s
        # by default; control action history_window sets it, 0 allowed here).
        self.history_window_s = 300

    def get_coll(self, db, coll):
        for c in self.shards.values():
            x = c.get_coll(db, coll)
            if x is not None:
                return x
        return None

    def snapshot_docs(self, db, coll, ts):
        out = []
        for name in self.shards_for(db, coll):
            out.extend(self.owned_docs(name, db, coll, self.shards[name].snapshot_docs(db, coll, ts)))
        return out

    def owned_docs(self, name, db, coll, docs):
        """The documents of shard `name` that a versioned read through mongos returns: for
        a sharded collection only those in a chunk the shard owns, so orphans (left by
        move_chunk until clean_orphans, or copies of a migration) are never returned."""
        ns = "%s.%s" % (db, coll)
        pattern = self.shard_keys.get(ns)
        # Filtered whatever the orphan setting is now: orphans left while it was on stay on
        # the shards after it is turned off, and a real shard filters every versioned read
        # by the chunks it owns (its range deleter, not mongos, removes them later).
        if not pattern:
            return docs
        ranges = [ch for ch in self.chunks(ns) if ch["shard"] == name]
        out = []
        for d in docs:
            k = self.key_of(d, pattern)
            if any(sb.cmp_values(ch["min"], k) <= 0 and sb.cmp_values(k, ch["max"]) < 0 for ch in ranges):
                out.append(d)
        return out

    @property
    def primary(self):
        return self.nodes[0]

    # ---- generic attributes ---------------------------------------------------------
    def cluster_time(self):
        return self.clock.last

    def new_cursor_id(self):
        while True:
            cid = self.rand.getrandbits(62) + 1
            if not any(cid in m.cursors for m in self.nodes):
                return cid

    def start(self):
        import simwire
        for n in self.nodes:
            srv = simwire.MemberServer(self.sim, n, self, self.dispatcher)
            srv.listen()
            self.servers.append(srv)
        with self.lock:
            for c in self.shards.values():
                self._register_shard(c)
            for n in self.nodes:
                self._cfg().insert_one("mongos", {"_id": n.address, "ping": self.clock.wall_dt(),
                                                  "up": Int64(0), "waiting": True,
                                                  "mongoVersion": ss.FULL_VERSION[self.version],
                                                  "advisoryHostFQDNs": []})

    def info(self, base):
        cfg = self.config
        base.update({
            "uri": "mongodb://%s/" % ",".join(n.address for n in self.nodes),
            "members": [{"shard": name, "host": m.address, "port": m.port, "state": m.state}
                        for name, c in self.shards.items() for m in c.members],
            "mongos": [n.address for n in self.nodes],
            "config": [m.address for m in cfg.members],
            "config_uri": "mongodb://%s/?replicaSet=%s" % (",".join(m.address for m in cfg.members), cfg.set_name),
            "shards": {name: self.conn_string(c) for name, c in self.shards.items()},
            "shard_uris": {name: "mongodb://%s/?replicaSet=%s" % (",".join(m.address for m in c.members), name)
                           for name, c in self.shards.items()},
            "serverVersion": self.version})
        return base

    # ---- metadata -------------------------------------------------------------------
    @staticmethod
    def conn_string(c):
        return "%s/%s" % (c.set_name, ",".join(m.address for m in c.members))

    def _cfg(self):
        if self.config.primary is None:
            raise SimError(133, "FailedToSatisfyReadPreference", "Could not find host matching read preference { mode: \"primary\" } for set %s" % self.config.set_name)
        return ss.Writer(self.config, "config", None)

    def _register_shard(self, c, identity=True):
        """identity False: a re-added shard keeps the shardIdentity it was given first."""
        c.append_entry({"op": "n", "ns": "", "o": {"msg": "shard identity"}})
        if identity:
            ss.Writer(c, "admin", None).insert_one("system.version", {
                "_id": "shardIdentity", "shardName": c.set_name,
                "clusterId": self.config.members[0].process_id,
                "configsvrConnectionString": self.conn_string(self.config)})
        self._cfg().insert_one("shards", {"_id": c.set_name, "host": self.conn_string(c), "state": 1,
                                          "topologyTime": self.clock.tick()})

    def shard_docs(self):
        c = self.config.get_coll("config", "shards")
        return [copy.deepcopy(d) for d in c.docs.values()] if c is not None else []

    def shard_cl(self, name):
        c = self.shards.get(name)
        if c is None:
            raise SimError(70, "ShardNotFound", "Shard %s not found" % name)
        return c

    def primary_of(self, c):
        p = c.primary
        if p is None:
            # mongos rewrites shard state-change errors to HostUnreachable (spec §4.6, 5.0+)
            if self.wire >= 13:
                raise SimError(6, "HostUnreachable", "Could not find host matching read preference { mode: \"primary\" } for set %s (NOT_PRIMARY)" % c.set_name)
            raise SimError(133, "FailedToSatisfyReadPreference", "Could not find host matching read preference { mode: \"primary\" } for set %s" % c.set_name)
        return p

    def db_primary(self, db, create=False):
        dbs = self.config.get_coll("config", "databases")
        d = dbs.docs.get(sb.id_key(db)) if dbs is not None else None
        if d is not None:
            return d["primary"]
        if not create:
            return next(iter(self.shards))
        # the shard with the fewest databases becomes primary (like the real placement)
        counts = collections.Counter(x["primary"] for x in (dbs.docs.values() if dbs else []))
        name = min(self.shards, key=lambda n: (counts.get(n, 0), list(self.shards).index(n)))
        doc = {"_id": db, "primary": name, "version": {"uuid": self.config.new_uuid(), "lastMod": 1}}
        if self.wire >= 13:
            doc["version"]["timestamp"] = self.clock.tick()
        else:
            doc["partitioned"] = False
        self._cfg().insert_one("databases", doc)
        return name

    def coll_meta(self, ns):
        c = self.config.get_coll("config", "collections")
        return c.docs.get(sb.id_key(ns)) if c is not None else None

    def chunks(self, ns):
        meta = self.coll_meta(ns)
        c = self.config.get_coll("config", "chunks")
        if meta is None or c is None:
            return []
        if self.wire >= 13:
            out = [d for d in c.docs.values() if d.get("uuid") == meta["uuid"]]
        else:
            out = [d for d in c.docs.values() if d.get("ns") == ns]
        return sorted(out, key=functools.cmp_to_key(lambda a, b: sb.cmp_values(a["min"], b["min"])))

    @staticmethod
    def key_of(doc, pattern):
        """The shard key of doc as chunk bounds compare with it: a hashed field's value is
        its hash64 (NumberLong; a missing field hashes as null), as on a real cluster."""
        return {f: simhash.hashed_value(sb.get_field(doc, f)) if k == "hashed" else sb.get_field(doc, f)
                for f, k in pattern.items()}

    def chunk_for(self, ns, keydoc):
        for ch in self.chunks(ns):
            if sb.cmp_values(ch["min"], keydoc) <= 0 and sb.cmp_values(keydoc, ch["max"]) < 0:
                return ch
        raise SimError(1, "InternalError", "no chunk for %r in %s" % (keydoc, ns))

    def shards_for(self, db, coll, q=None):
        """Shard names that may hold documents of db.coll matching q."""
        ns = "%s.%s" % (db, coll)
        pattern = self.shard_keys.get(ns)
        if not pattern:
            return [self.db_primary(db)]
        if q:
            keydoc = {}
            for f in pattern:
                v = q.get(f)
                if v is None or (isinstance(v, dict) and any(k.startswith("$") for k in v)):
                    keydoc = None
                    break
                keydoc[f] = v
            if keydoc is not None:
                return [self.chunk_for(ns, self.key_of(keydoc, pattern))["shard"]]
        seen = []
        for ch in self.chunks(ns):
            if ch["shard"] not in seen:
                seen.append(ch["shard"])
        return seen or [self.db_primary(db)]

    # ---- sharding operations (wire commands and control actions share them) ------------
    def shard_collection(self, ns, key, unique=False):
        db, coll = ns.split(".", 1)
        if self.coll_meta(ns) is not None:
            raise SimError(20, "AlreadyInitialized", "sharding already enabled for collection %s" % ns)
        for v in key.values():
            if v not in (1, 1.0, -1) and v != "hashed":
                raise SimError(2, "BadValue", "unsupported shard key pattern %r" % (key,))
        if sum(1 for v in key.values() if v == "hashed") > 1:
            raise SimError(2, "BadValue", "a shard key pattern can have at most one hashed field")
        prim = self.db_primary(db, create=True)
        pc = self.shard_cl(prim)
        c = pc.ensure_coll(db, coll)
        for d in c.docs.values():
            for f in key:
                if not sb.has_path(d, f):
                    raise SimError(61, "ShardKeyNotFound", "document %r has no shard key field %s" % (d.get("_id"), f))
        self.shard_keys[ns] = dict(key)
        now = self.clock.tick()
        meta = {"_id": ns, "lastmodEpoch": ObjectId(), "lastmod": self.clock.wall_dt()}
        if self.wire >= 13:
            meta["timestamp"] = now
        else:
            meta["dropped"] = False
        meta.update({"uuid": c.uuid, "key": dict(key), "unique": bool(unique), "noBalance": False})
        cfg = self._cfg()
        cfg.insert_one("collections", meta)
        chunk = {"_id": ObjectId()}
        if self.wire >= 13:
            chunk["uuid"] = c.uuid
        else:
            chunk["ns"] = ns
            chunk["lastmodEpoch"] = meta["lastmodEpoch"]
        chunk.update({"min": {f: MinKey() for f in key}, "max": {f: MaxKey() for f in key},
                      "shard": prim, "lastmod": Timestamp(1, 0), "history": [{"validAfter": now, "shard": prim}]})
        cfg.insert_one("chunks", chunk)
        pc.append_entry({"op": "n", "ns": ns, "ui": c.uuid, "o": {"msg": {"shardCollection": ns}},
                         "o2": {"shardCollection": ns, "key": dict(key), "unique": bool(unique),
                                "numInitialChunks": Int64(0), "presplitHashedZones": False}})
        return {"collectionsharded": ns, "collectionUUID": c.uuid}

    def split(self, ns, middle):
        pattern = self.shard_keys.get(ns)
        if not pattern:
            raise SimError(61, "ShardNotFound", "collection %s is not sharded" % ns)
        # split's middle is in the chunk bounds' space: for a hashed field the hash value
        # (NumberLong) itself, as real MongoDB takes it, not a document value to hash.
        mid = {f: sb.get_field(middle, f) for f in pattern}
        ch = self.chunk_for(ns, mid)
        if sb.cmp_values(ch["min"], mid) == 0:
            return {}
        cfg = self._cfg()
        lm = ch["lastmod"]
        cfg.update("chunks", {"_id": ch["_id"]}, {"$set": {"max": mid, "lastmod": Timestamp(lm.time, lm.inc + 1)}})
        new = {k: v for k, v in ch.items() if k not in ("_id",)}
        new = dict([("_id", ObjectId())] + list(new.items()))
        new["min"] = mid
        new["lastmod"] = Timestamp(lm.time, lm.inc + 2)
        cfg.insert_one("chunks", new)
        return {}

    def move_chunk(self, ns, find, to):
        """Move the chunk holding `find` to shard `to` (spec §6.6): recipient inserts with
        fromMigrate, donor no-op migrateChunkToNewShard when the recipient had no chunk,
        config.chunks update, donor range deletion with fromMigrate."""
        pattern = self.shard_keys.get(ns)
        if not pattern:
            raise SimError(61, "ShardNotFound", "collection %s is not sharded" % ns)
        db, coll = ns.split(".", 1)
        ch = self.chunk_for(ns, self.key_of(find, pattern))
        src_name = ch["shard"]
        if src_name == to:
            return {"millis": 0}
        donor = self.shard_cl(src_name)
        recip = self.shard_cl(to)
        self.primary_of(donor)
        self.primary_of(recip)
        had_chunk = any(c["shard"] == to for c in self.chunks(ns))
        dcoll = donor.get_coll(db, coll)
        rcoll = recip.get_coll(db, coll)
        if rcoll is None:
            rcoll = recip.ensure_coll(db, coll)
            rcoll.uuid = dcoll.uuid  # a sharded collection has one UUID on every shard
        moving = [d for d in list(dcoll.docs.values()) if
                  sb.cmp_values(ch["min"], self.key_of(d, pattern)) <= 0 and sb.cmp_values(self.key_of(d, pattern), ch["max"]) < 0]
        w = ss.Writer(recip, db, None)
        for d in moving:
            rcoll.docs[sb.id_key(d["_id"])] = d
            e = {"op": "i", "ns": ns, "ui": rcoll.uuid, "o": d, "fromMigrate": True}
            if recip.wire >= 17:
                e["o2"] = w.doc_key(coll, d)
            recip.append_entry(e)
        if not had_chunk:
            donor.append_entry({"op": "n", "ns": ns, "ui": dcoll.uuid,
                                "o": {"msg": {"migrateChunkToNewShard": ns}},
                                "o2": {"migrateChunkToNewShard": ns, "fromShardId": src_name, "toShardId": to}})
        now = self.clock.tick()
        lm = ch["lastmod"]
        # As commitChunkMigration: the old history loses its entries older than the window,
        # but keeps at least one (the donor's), then the recipient's entry goes in front.
        old = list(ch.get("history", []))
        while len(old) > 1 and old[-1]["validAfter"].time + self.history_window_s < now.time:
            old.pop()
        hist = [{"validAfter": now, "shard": to}] + old
        self._cfg().update("chunks", {"_id": ch["_id"]},
                           {"$set": {"shard": to, "lastmod": Timestamp(lm.time + 1, 0), "history": hist}})
        if self.orphans:
            self.pending_deletions.append((src_name, ns, ch["min"], ch["max"]))
        else:
            self._delete_range(donor, ns, ch["min"], ch["max"])
        return {"millis": 0, "moved": len(moving)}

    def merge_chunks(self, ns, lo, hi):
        """mergeChunks of the contiguous chunks of one shard that make up [lo, hi): one chunk
        whose history is the single entry {validAfter: merge time, shard}, as the config
        server writes it (the merged chunks' histories are dropped)."""
        if not self.shard_keys.get(ns):
            raise SimError(61, "ShardNotFound", "collection %s is not sharded" % ns)
        parts = sorted([ch for ch in self.chunks(ns) if sb.cmp_values(lo, ch["min"]) <= 0 and
                        sb.cmp_values(ch["max"], hi) <= 0], key=functools.cmp_to_key(lambda a, b: sb.cmp_values(a["min"], b["min"])))
        if (not parts or sb.cmp_values(parts[0]["min"], lo) != 0 or sb.cmp_values(parts[-1]["max"], hi) != 0 or
                any(sb.cmp_values(a["max"], b["min"]) != 0 for a, b in zip(parts, parts[1:]))):
            raise SimError(20, "IllegalOperation", "could not merge chunks, the range %r %r is not made of whole chunks" % (lo, hi))
        if len({ch["shard"] for ch in parts}) != 1:
            raise SimError(20, "IllegalOperation", "could not merge chunks, they are not all on the same shard")
        if len(parts) == 1:
            return {}
        now = self.clock.tick()
        cfg = self._cfg()
        lm = max(ch["lastmod"] for ch in parts)
        cfg.update("chunks", {"_id": parts[0]["_id"]},
                   {"$set": {"max": hi, "lastmod": Timestamp(lm.time, lm.inc + 1),
                             "history": [{"validAfter": now, "shard": parts[0]["shard"]}]}})
        for ch in parts[1:]:
            cfg.delete("chunks", {"_id": ch["_id"]}, 1)
        return {}

    def _delete_range(self, donor, ns, lo, hi):
        """The donor's range deleter: removes documents of [lo, hi) that the donor no longer
        owns, each as a `d` entry with fromMigrate (spec §6.6 step 3)."""
        db, coll = ns.split(".", 1)
        pattern = self.shard_keys.get(ns)
        dcoll = donor.get_coll(db, coll)
        if dcoll is None:
            return 0
        owned = [c for c in self.chunks(ns) if c["shard"] == donor.set_name]
        wd = ss.Writer(donor, db, None)
        n = 0
        for d in list(dcoll.docs.values()):
            k = self.key_of(d, pattern)
            if not (sb.cmp_values(lo, k) <= 0 and sb.cmp_values(k, hi) < 0):
                continue
            if any(sb.cmp_values(c["min"], k) <= 0 and sb.cmp_values(k, c["max"]) < 0 for c in owned):
                continue  # the range came back to this shard meanwhile
            dcoll.docs.pop(sb.id_key(d["_id"]), None)
            donor.append_entry({"op": "d", "ns": ns, "ui": dcoll.uuid, "o": wd.doc_key(coll, d), "fromMigrate": True})
            n += 1
        return n

    def clean_orphans(self):
        """Runs every deferred range deletion now; returns how many documents went."""
        n = 0
        pending, self.pending_deletions = self.pending_deletions, []
        for src_name, ns, lo, hi in pending:
            if src_name in self.shards:
                n += self._delete_range(self.shards[src_name], ns, lo, hi)
        return n

    def add_shard(self, members=1, name=None):
        """A new shard; name: a shard removed earlier comes back (its replica set, with the
        data it kept, gets a new config.shards document and topologyTime)."""
        if name is not None:
            c = self.removed_shards.pop(name, None)
            if c is None:
                raise SimError(2, "BadValue", "no removed shard named %s" % name)
            self.shards[name] = c
            self._register_shard(c, identity=False)
            return {"shardAdded": name, "host": self.conn_string(c)}
        if self.make_shard is None:
            raise SimError(2, "BadValue", "cannot create shards here")
        c = self.make_shard(members)
        self.shards[c.set_name] = c
        self._register_shard(c)
        return {"shardAdded": c.set_name, "host": self.conn_string(c)}

    def remove_shard(self, name):
        """First call: draining; second call (once the shard holds no chunks and is no
        database's primary): the config.shards document is removed (spec §6.2)."""
        self.shard_cl(name)
        sdoc = self.config.get_coll("config", "shards").docs.get(sb.id_key(name))
        cfg = self._cfg()
        if not sdoc.get("draining"):
            cfg.update("shards", {"_id": name}, {"$set": {"draining": True}})
            return {"msg": "draining started successfully", "state": "started", "shard": name}
        chunks = self.config.get_coll("config", "chunks")
        left = sum(1 for ch in (chunks.docs.values() if chunks else []) if ch["shard"] == name)
        dbs = self.config.get_coll("config", "databases")
        prim = [d["_id"] for d in (dbs.docs.values() if dbs else []) if d["primary"] == name]
        if left or prim:
            return {"msg": "draining ongoing", "state": "ongoing",
                    "remaining": {"chunks": Int64(left), "dbs": Int64(len(prim))}, "dbsToMove": prim}
        cfg.delete("shards", {"_id": name}, 1)
        self.removed_shards[name] = self.shards.pop(name)
        return {"msg": "removeshard completed successfully", "state": "completed", "shard": name}

    # ---- control actions --------------------------------------------------------------
    def act_shard_collection(self, a):
        with self.lock:
            return self.shard_collection(a["ns"], a["key"], bool(a.get("unique")))

    def act_split(self, a):
        with self.lock:
            return self.split(a["ns"], a["middle"])

    def act_move_chunk(self, a):
        with self.lock:
            return self.move_chunk(a["ns"], a["find"], a["to"])

    def act_merge_chunks(self, a):
        with self.lock:
            return self.merge_chunks(a["ns"], a["bounds"][0], a["bounds"][1])

    def act_history_window(self, a):
        """{"s": n}: chunk history entries older than n seconds are dropped on a migration
        commit (minSnapshotHistoryWindowInSeconds; the real server never goes below 10)."""
        with self.lock:
            self.history_window_s = int(a["s"])
            return {"history_window_s": self.history_window_s}

    def act_orphans(self, a):
        """{"keep": true}: move_chunk leaves the moved documents on the donor (orphans) until
        clean_orphans; {"keep": false}: range deletion right after each move (the default)."""
        with self.lock:
            self.orphans = bool(a.get("keep", True))
            return {"orphans": self.orphans}

    def act_clean_orphans(self, a):
        with self.lock:
            return {"deleted": self.clean_orphans()}

    def act_add_shard(self, a):
        with self.lock:
            return self.add_shard(int(a.get("members", 1)), a.get("name"))

    def act_remove_shard(self, a):
        with self.lock:
            return self.remove_shard(a["name"])

