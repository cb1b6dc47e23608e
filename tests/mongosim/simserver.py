"""Replica-set model, wire protocol and commands of the MongoDB simulator.

Why not mockupdb: mockupdb 1.8 mis-declares the OP_MSG exhaustAllowed bit (16 instead of
1 << 16, mongo-sim-spec.md §8.3), so a pooled libmongoc client's awaitable `hello` is refused and
its monitoring breaks; it also has no notion of several members sharing one oplog, of blocking
awaitData getMores woken by writes, or of dropping connections on demand. The framing needed
here is small (OP_QUERY in, OP_REPLY out, OP_MSG both ways: spec §1.1-§1.3), so this module
frames messages itself on plain threaded sockets: one listening socket per member, one thread
per connection, one cluster-wide lock with condition variables that writes and topology changes
signal (spec §8.3 "block on a condition variable ..., not sleep-poll").

All members of a replica set share one logical data store and one oplog (replication lag is not
modelled); each member keeps its own role, topologyVersion, cursors and connections.
"""

import bisect
import collections
import datetime
import os
import random
import socket
import struct
import threading
import time
import uuid

import bson
from bson.binary import Binary
from bson.int64 import Int64
from bson.objectid import ObjectId
from bson.son import SON
from bson.timestamp import Timestamp

import simbson as sb
import simrollback
from simwriter import (EMPTY_UID, BadId, DupKey, Writer, check_ns, commit_prepared,  # noqa: F401
                       commit_txn, prepare_txn)
from simbson import SimError

OP_REPLY, OP_QUERY, OP_COMPRESSED, OP_MSG = 1, 2004, 2012, 2013

WIRE = {"4.4": 9, "5.0": 13, "6.0": 17, "7.0": 21, "8.0": 25}
FULL_VERSION = {"4.4": "4.4.29", "5.0": "5.0.28", "6.0": "6.0.16", "7.0": "7.0.14", "8.0": "8.0.3"}

RESUMABLE_CODES = {6, 7, 89, 91, 134, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436, 63, 150,
                   13388, 234, 133}
RETRYABLE_WRITE_CODES = {6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436}
STATE_CHANGE_CODES = {10107, 13435, 13436, 189, 11602}  # replies carry topologyVersion
CODE_NAMES = {
    2: "BadValue", 6: "HostUnreachable", 7: "HostNotFound", 9: "FailedToParse", 11: "UserNotFound",
    13: "Unauthorized", 20: "IllegalOperation", 26: "NamespaceNotFound", 43: "CursorNotFound",
    47: "NoMatchingDocument", 48: "NamespaceExists", 50: "MaxTimeMSExpired", 59: "CommandNotFound",
    63: "StaleShardVersion", 64: "WriteConcernFailed", 72: "InvalidOptions", 73: "InvalidNamespace",
    89: "NetworkTimeout", 91: "ShutdownInProgress", 112: "WriteConflict", 133: "FailedToSatisfyReadPreference",
    134: "ReadConcernMajorityNotAvailableYet", 136: "CappedPositionLost", 150: "StaleEpoch",
    175: "QueryPlanKilled", 189: "PrimarySteppedDown", 216: "ElectionInProgress", 225: "TransactionTooOld",
    234: "RetryChangeStream", 237: "CursorKilled", 239: "SnapshotTooOld", 251: "NoSuchTransaction",
    256: "TransactionCommitted", 260: "InvalidResumeToken", 262: "ExceededTimeLimit",
    263: "OperationNotSupportedInTransaction", 280: "ChangeStreamFatalError",
    286: "ChangeStreamHistoryLost", 352: "UnsupportedOpQueryCommand", 9001: "SocketException",
    10058: "LegacyNotPrimary", 10107: "NotWritablePrimary", 10334: "BSONObjectTooLarge",
    11000: "DuplicateKey", 11600: "InterruptedAtShutdown", 11601: "Interrupted",
    11602: "InterruptedDueToReplStateChange", 13388: "StaleConfig", 13435: "NotPrimaryNoSecondaryOk",
    13436: "NotPrimaryOrSecondary", 40415: "IDLUnknownField", 40573: "Location40573",
}
INTERNAL_DBS = ("admin", "config", "local")
ZERO_SIG = {"hash": Binary(b"\x00" * 20, 0), "keyId": Int64(0)}


def now_utc_ms():
    n = datetime.datetime.now(datetime.timezone.utc)
    return n.replace(microsecond=(n.microsecond // 1000) * 1000)


class Clock(object):
    """Hybrid logical clock for optimes: seconds follow the wall clock, the increment counts
    writes within a second (spec §8.1 item 3). With a data seed the wall clock is manual: it
    starts at 1700000000 + 1000 * (seed % 1000) s and moves only through the `clock` control
    action, so the same writes give the same optimes, wall times and resume tokens."""

    def __init__(self, seed=None):
        self.offset = 0.0
        self.manual = seed is not None
        if self.manual:
            self.offset = 1700000000.0 + (seed % 1000) * 1000
        self.last = Timestamp(0, 0)

    def wall(self):
        if self.manual:
            return self.offset
        return time.time() + self.offset

    def wall_dt(self):
        w = self.wall()
        return datetime.datetime.fromtimestamp(int(w * 1000) / 1000.0, datetime.timezone.utc)

    def tick(self):
        s = int(self.wall())
        if s > self.last.time:
            self.last = Timestamp(s, 1)
        else:
            self.last = Timestamp(self.last.time, self.last.inc + 1)
        return self.last


class Shared(object):
    """State shared by the replica sets of one deployment."""

    def __init__(self, seed=None):
        self.lock = threading.RLock()
        self.oplog_cond = threading.Condition(self.lock)
        self.topo_cond = threading.Condition(self.lock)
        self.clock = Clock(seed)
        self.shard_keys = {}  # "db.coll" -> shard key pattern (sharded collections)


class Collection(object):
    def __init__(self, name, uid, options=None):
        self.name = name
        self.uuid = uid
        self.docs = collections.OrderedDict()  # id_key -> document (natural order)
        self.options = options or {}

    @property
    def pre_images(self):
        cs = self.options.get("changeStreamPreAndPostImages")
        return bool(isinstance(cs, dict) and cs.get("enabled"))


class Oplog(object):
    """local.oplog.rs: entries sorted by ts with a parallel key list for bisect (O(log n)
    positioning), capped by bytes like the real capped collection (spec §5.6)."""

    def __init__(self, cap_bytes):
        self.entries = []
        self.keys = []
        self.sizes = []
        self.total = 0
        self.cap = cap_bytes
        self.truncated_up_to = -1  # greatest key removed by truncation
        self.images = {}  # (ts key, txnOpIndex) -> (pre, post) for collections with images

    def append(self, entry):
        size = len(sb.encode(entry))
        self.entries.append(entry)
        self.keys.append(sb.ts_key(entry["ts"]))
        self.sizes.append(size)
        self.total += size
        if self.cap and self.total > self.cap:
            n = 0
            t = self.total
            while t > self.cap and n < len(self.entries) - 1:
                t -= self.sizes[n]
                n += 1
            self.drop_front(n)

    def drop_front(self, n):
        n = min(n, len(self.entries) - 1)  # an initiated replica set never has an empty oplog
        if n <= 0:
            return 0
        self.truncated_up_to = max(self.truncated_up_to, self.keys[n - 1])
        self.total -= sum(self.sizes[:n])
        first_kept = self.keys[n]
        del self.entries[:n]
        del self.keys[:n]
        del self.sizes[:n]
        if self.images:
            for k in [k for k in self.images if k[0] < first_kept]:
                del self.images[k]
        return n

    def index_after(self, key):
        """Index of the first entry with ts key > key."""
        return bisect.bisect_right(self.keys, key)

    def index_at_or_after(self, key):
        return bisect.bisect_left(self.keys, key)

    @property
    def last_key(self):
        return self.keys[-1] if self.keys else 0

    @property
    def first_key(self):
        return self.keys[0] if self.keys else 0


class FailRule(object):
    """One injected failure: next `times` commands named in `commands` (None: every command)."""

    def __init__(self, spec):
        self.commands = spec.get("commands") or spec.get("failCommands")
        self.times = spec.get("times")
        self.skip = int(spec.get("skip", 0) or 0)
        self.code = spec.get("code", spec.get("errorCode"))
        self.code_name = spec.get("codeName")
        self.errmsg = spec.get("errmsg")
        self.labels = spec.get("errorLabels")
        self.close = bool(spec.get("closeConnection"))
        # close only after the command ran (a reply lost on the network, spec §8.2)
        self.after_apply = bool(spec.get("afterApply"))
        # send only the first half of the reply, then close (a reply cut mid-stream)
        self.partial = bool(spec.get("partialReply"))
        self.block_ms = spec.get("blockTimeMS") if spec.get("blockConnection", True) else None
        self.member = spec.get("member")
        self.app_name = spec.get("appName")
        self.wce = spec.get("writeConcernError")

    def applies(self, name, member_idx, app_name):
        if self.commands is not None and name not in self.commands:
            return False
        if self.member is not None and self.member != member_idx:
            return False
        if self.app_name is not None and self.app_name != app_name:
            return False
        return True


class Member(object):
    def __init__(self, idx, host, port):
        self.idx = idx
        self.host = host
        self.port = port
        self.state = "SECONDARY"
        self.process_id = ObjectId()
        self.counter = 0
        self.cursors = {}
        self.conns = set()
        self.listener = None
        self.reachable = True
        self.black_hole = False
        self.lag_ms = 0
        self.removed = False  # dropped from the replica set config: answers as a ghost
        self.hidden = False  # hidden, priority 0: secondary, never in hosts, never elected
        self.conn_counter = 0
        self.advertise_host = None  # --advertise-host: the name hello reports instead of host

    @property
    def address(self):
        return "%s:%d" % (self.host, self.port)

    @property
    def advertised(self):
        """host:port as the replica set config names the member (hello's hosts, primary,
        me); with --advertise-host a name that need not resolve, as behind NAT."""
        return "%s:%d" % (self.advertise_host or self.host, self.port)

    def topology_version(self):
        return {"processId": self.process_id, "counter": Int64(self.counter)}


class Txn(object):
    """A multi-document transaction of one session: writes are buffered in an overlay and
    logged as one applyOps entry at commit (spec §5.4, §7)."""

    def __init__(self, txn_number):
        self.number = txn_number
        self.state = "in_progress"
        self.overlay = {}  # (db, coll, idkey) -> doc or None (deleted)
        self.ops = []  # inner oplog operations, in order
        self.images = []


class Cluster(object):
    """A replica set of N members sharing one store and oplog."""

    def __init__(self, members=3, set_name="rs0", server_version="6.0", oplog_size_mb=0,
                 seed=None, noop_interval=10.0, pre_images=False, host="127.0.0.1", ports=None,
                 shared=None, configsvr=False):
        # several replica sets of one sharded cluster share a lock, conditions and the clock
        # (cluster time is gossiped between them in a real cluster)
        if shared is None:
            shared = Shared(seed)
        self.shared = shared
        self.lock = shared.lock
        self.oplog_cond = shared.oplog_cond
        self.topo_cond = shared.topo_cond
        self.configsvr = configsvr
        self.shard_keys = shared.shard_keys
        self.version = server_version
        self.wire = WIRE[server_version]
        self.set_name = set_name
        self.rand = random.Random(seed)
        self.seed = seed
        self.clock = shared.clock
        self.oid_counter = 0
        self.term = 0
        self.set_version = 1
        self.store = {}
        self.oplog = Oplog(int(oplog_size_mb * 1024 * 1024))
        self.noop_interval = noop_interval
        self.pre_images_all = pre_images
        self.sessions = {}  # lsid id -> {"txn": int, "replies": {txn: reply}, "txn_obj": Txn}
        self.fail_rules = []
        self.delays = {}  # command -> (ms, member or None)
        self.counters = collections.Counter()
        self.member_counters = collections.defaultdict(collections.Counter)
        self.members = [Member(i, host, (ports[i] if ports else 0)) for i in range(members)]
        for m in self.members:
            m.process_id = self.new_oid()
        self.last_write_wall = time.time()
        self.stopping = False
        self.token_version = 2 if self.wire >= 21 else 1
        self.host = host
        self.cursor_seq = 0
        # undo log for snapshot reads at an older cluster time (readConcern snapshot,
        # atClusterTime): (ts key, db, coll, id key, previous document or None), kept for
        # minSnapshotHistoryWindowInSeconds (spec §1.9)
        self.undo_keys = []
        self.undo = []
        self.undo_wall = []
        self.undo_floor = 0
        self.history_window = 300.0
        self.txn_ops_per_entry = 0  # 0: a transaction is one applyOps entry
        self.majority_frozen = None  # ts key of the frozen majority point (no-majority fault)
        self.poison_pending = False
        self.poison_keys = set()  # entries whose change event is "larger than 16 MiB"
        # largest change event a stream returns (BSONObjMaxInternalSize, spec §3.12); tests
        # may lower it to split or refuse events of a few hundred KiB
        self.max_event_bytes = 16 * 1024 * 1024 + 16 * 1024

    def applied_key(self, member):
        """ts key of the last entry `member` has applied: a secondary with a replication lag
        (control 'lag') applies entries `lag_ms` after their wall time (spec §8.2)."""
        lag = getattr(member, "lag_ms", 0)
        if not lag or member.state == "PRIMARY" or not self.oplog.entries:
            return self.oplog.last_key
        cutoff = self.clock.wall_dt() - datetime.timedelta(milliseconds=lag)
        i = len(self.oplog.entries) - 1
        while i > 0 and self.oplog.entries[i]["wall"] > cutoff:
            i -= 1
        return self.oplog.keys[i]

    def majority_key(self):
        """The majority commit point: the frozen point (no_majority), else the newest entry a
        majority of the members has applied (replication lag: control 'lag')."""
        if self.majority_frozen is not None:
            return self.majority_frozen
        keys = sorted((self.applied_key(m) for m in self.members if not m.removed), reverse=True)
        return keys[len(keys) // 2] if keys else self.oplog.last_key

    def record_undo(self, ts, items):
        k = sb.ts_key(ts)
        now = time.time()
        for it in items:
            self.undo_keys.append(k)
            self.undo.append(it)
            self.undo_wall.append(now)
        n = bisect.bisect_left(self.undo_wall, now - self.history_window)
        if n > 256 or (n and len(self.undo) > 100000):
            self.undo_floor = self.undo_keys[n - 1]
            del self.undo_keys[:n]
            del self.undo[:n]
            del self.undo_wall[:n]

    def snapshot_docs(self, db, coll, ts):
        """Documents of db.coll as they were at cluster time ts (newest writes undone)."""
        c = self.get_coll(db, coll)
        docs = collections.OrderedDict(c.docs) if c is not None else collections.OrderedDict()
        i = bisect.bisect_right(self.undo_keys, sb.ts_key(ts))
        for j in range(len(self.undo) - 1, i - 1, -1):
            d, cn, key, old = self.undo[j]
            if d == db and cn == coll:
                if old is None:
                    docs.pop(key, None)
                else:
                    docs[key] = old
        return list(docs.values())

    # ---- identifiers -------------------------------------------------------------------
    def new_oid(self):
        if self.seed is None:
            return ObjectId()
        self.oid_counter += 1
        return ObjectId(struct.pack(">I", int(self.clock.wall()) & 0xFFFFFFFF)
                        + struct.pack(">Q", self.seed & 0xFFFFFFFFFF)[3:]
                        + struct.pack(">I", self.oid_counter & 0xFFFFFF)[1:])

    def new_uuid(self):
        return uuid.UUID(int=self.rand.getrandbits(128), version=4)

    def new_cursor_id(self):
        while True:
            cid = self.rand.getrandbits(62) + 1
            if not any(cid in m.cursors for m in self.members):
                return cid

    # ---- topology ----------------------------------------------------------------------
    @property
    def primary(self):
        for m in self.members:
            if m.state == "PRIMARY":
                return m
        return None

    def hosts(self):
        return [m.advertised for m in self.members if not m.removed and not m.hidden]

    def cluster_time(self):
        return self.clock.last

    def election_id(self):
        return ObjectId(b"\x7f\xff\xff\xff" + struct.pack(">Q", self.term))

    def bump(self, m):
        m.counter += 1
        self.topo_cond.notify_all()

    def elect(self, idx):
        """Make member idx primary: term + 1, new electionId, 'new primary' no-op (spec §2.6)."""
        with self.lock:
            cur = self.primary
            if cur is not None and cur.idx == idx:
                return
            if cur is not None:
                cur.state = "SECONDARY"
                self.bump(cur)
            m = self.members[idx]
            if not m.reachable or m.removed or m.hidden:
                raise SimError(133, "FailedToSatisfyReadPreference", "member %d is unreachable or not in the config" % idx)
            self.term += 1
            m.state = "PRIMARY"
            self.bump(m)
            for o in self.members:
                if o is not m and o is not cur:
                    self.bump(o)
            self.append_entry({"op": "n", "ns": "", "o": {"msg": "new primary"}})

    def step_down(self, elect=None, no_primary_ms=0, stepping_ms=0, rollback=False):
        """Primary becomes secondary (counter +1). With stepping_ms it first spends that long
        neither primary nor secondary (counter +1 again when it becomes secondary, spec §2.6).
        If elect is an index, that member wins an election after no_primary_ms; elect='next'
        picks the next reachable member. rollback: the writes past the frozen majority point
        are rolled back before the election (simrollback.roll_back; its summary is kept in
        self.last_rollback); "reuse_ts": the clock is also set back to the common point, so
        the new primary's entries take the rolled-back entries' timestamps in a new term."""
        if stepping_ms:
            with self.lock:
                cur = self.primary
                if cur is None:
                    raise SimError(10107, "NotWritablePrimary", "not primary")
                cur.state = "STEPPING_DOWN"
                self.bump(cur)
            time.sleep(stepping_ms / 1000.0)
        with self.lock:
            cur = self.primary or next((m for m in self.members if m.state == "STEPPING_DOWN"), None)
            if cur is None:
                raise SimError(10107, "NotWritablePrimary", "not primary")
            if rollback:
                self.last_rollback = simrollback.roll_back(self, cur, reuse_ts=rollback == "reuse_ts")
            cur.state = "SECONDARY"
            self.bump(cur)
            for o in self.members:
                if o is not cur:
                    self.bump(o)
            if elect == "next":
                cands = [m.idx for m in self.members[cur.idx + 1:] + self.members[:cur.idx + 1]
                         if m.reachable and m is not cur and not m.removed and not m.hidden]
                elect = cands[0] if cands else cur.idx
        if elect is not None:
            if no_primary_ms:
                t = threading.Timer(no_primary_ms / 1000.0, self.elect, args=(elect,))
                t.daemon = True
                t.start()
            else:
                self.elect(elect)
        return elect

    # ---- oplog -------------------------------------------------------------------------
    def append_entry(self, entry, **extra):
        """Append one oplog entry; fills ts, t, v, wall (spec §5.1). Caller holds the lock."""
        e = {}
        e["op"] = entry["op"]
        e["ns"] = entry["ns"]
        if "ui" in entry:
            e["ui"] = entry["ui"]
        e["o"] = entry["o"]
        if "o2" in entry:
            e["o2"] = entry["o2"]
        for k in ("lsid", "txnNumber", "prevOpTime", "stmtId", "fromMigrate", "b"):
            if k in entry:
                e[k] = entry[k]
        e["ts"] = self.clock.tick()
        e["t"] = Int64(self.term if self.term else -1)
        e["v"] = Int64(2)
        e["wall"] = self.clock.wall_dt()
        e.update(extra)
        if self.poison_pending and (e["op"] in ("i", "u", "d") or "applyOps" in e["o"]):
            self.poison_pending = False
            self.poison_keys.add(sb.ts_key(e["ts"]))
        self.oplog.append(e)
        self.last_write_wall = time.time()
        self.oplog_cond.notify_all()
        return e

    def truncate_oplog(self, before=None, count=None, keep=None):
        with self.lock:
            if before is not None:
                n = self.oplog.index_at_or_after(sb.ts_key(before))
            elif keep is not None:
                n = len(self.oplog.entries) - int(keep)
            else:
                n = int(count or 0)
            removed = self.oplog.drop_front(max(0, n))
            self.oplog_cond.notify_all()
            return removed

    def noop_loop(self):
        while not self.stopping:
            time.sleep(min(self.noop_interval, 0.5) if self.noop_interval > 0 else 0.5)
            if self.noop_interval <= 0:
                continue
            with self.lock:
                if self.primary is not None and time.time() - self.last_write_wall >= self.noop_interval:
                    self.append_entry({"op": "n", "ns": "", "o": {"msg": "periodic noop"}})

    # ---- store -------------------------------------------------------------------------
    def get_coll(self, db, coll):
        return self.store.get(db, {}).get(coll)

    def ensure_coll(self, db, coll, options=None, log=True):
        c = self.get_coll(db, coll)
        if c is not None:
            return c
        check_ns(db, coll)
        c = Collection(coll, self.new_uuid(), dict(options or {}))
        self.store.setdefault(db, {})[coll] = c
        if log:
            o = {"create": coll}
            for k, v in c.options.items():
                o[k] = v
            o["idIndex"] = {"v": 2, "key": {"_id": 1}, "name": "_id_"}
            self.append_entry({"op": "c", "ns": db + ".$cmd", "ui": c.uuid, "o": o})
        return c

    def wants_images(self, c):
        return self.pre_images_all or c.pre_images

    def load(self, path, ns=None):
        """Load JSON-lines Extended JSON as ordinary inserts (with oplog entries)."""
        from bson import json_util
        if ns is None:
            d = os.path.basename(os.path.dirname(os.path.abspath(path)))
            stem = os.path.splitext(os.path.basename(path))[0]
            ns = "%s.%s" % (d, stem)
        db, coll = ns.split(".", 1)
        docs = []
        opts = json_util.JSONOptions(tz_aware=True, uuid_representation=bson.binary.STANDARD)
        with open(path, "r", encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line:
                    docs.append(json_util.loads(line, json_options=opts))
        with self.lock:
            w = Writer(self, db, None)
            for d in docs:
                w.insert_one(coll, d)
        return len(docs)
