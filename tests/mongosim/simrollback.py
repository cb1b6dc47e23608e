"""Rollback of a replica set's writes past the majority commit point (mongo-sim-spec.md §8.2
"no majority"; MongoDB's src/mongo/db/repl/README.md, "Rollback: Recover To A Timestamp").

In MongoDB, a primary that cannot reach a majority still takes `w: 1` writes; when another
member wins an election, the old primary's writes past the common point exist on no other
member. When the old primary rejoins it enters ROLLBACK: it kills every user operation (reads
are refused while it rolls back), recovers its data to the stable (majority-committed)
timestamp, truncates its oplog after the common point, invalidates its sessions and becomes a
secondary of the new primary's history.

The simulator's members share one store and one oplog, so the rollback happens once, for the
whole set, when the `stepdown` control is given `"rollback": true`: the common point is the
frozen majority point (control `no_majority`); every entry after it leaves the oplog, every
document write logged after it is undone from the undo log (Cluster.record_undo), collections
created after it are dropped, sessions are forgotten, the old primary's cursors are killed (an
awaitData getMore waiting on one fails with 11602 InterruptedDueToReplStateChange, as an
operation killed by a state transition does; a later getMore finds no cursor: 43
CursorNotFound), and the majority point is released. The new primary's "new primary" no-op is
then the first entry of the new history.

Entries the simulator cannot roll back (dropping or renaming a collection or a database past
the common point: their documents are gone from the undo log) make the control fail with
BadValue and change nothing, rather than leave a half-rolled-back store.
"""

import bisect
import time

from simvalue import SimError
from simvalue import id_key as id_key_of
from simtoken import key_ts, ts_key

# commands whose effect the undo log does not hold
UNDOABLE_COMMANDS = ("drop", "dropDatabase", "renameCollection", "convertToCapped", "emptycapped")


def _check(cl, point, gone):
    for e in gone:
        if e["op"] == "c":
            for name in UNDOABLE_COMMANDS:
                if name in e["o"]:
                    raise SimError(2, "BadValue",
                                   "cannot roll back past Timestamp(%d, %d): the entry at Timestamp(%d, %d) "
                                   "(%s) is not undoable in the simulator"
                                   % (key_ts(point).time, key_ts(point).inc, e["ts"].time, e["ts"].inc, name))
    if gone and cl.undo_floor > point:
        raise SimError(2, "BadValue",
                       "cannot roll back past Timestamp(%d, %d): the undo history starts later"
                       % (key_ts(point).time, key_ts(point).inc))


def _interrupt_cursors(member):
    """ROLLBACK kills every user operation of the rolling-back node: its cursors go."""
    n = 0
    for cid in list(member.cursors):
        ce = member.cursors.pop(cid)
        ce.impl.interrupted = True
        n += 1
    return n


def interrupted_error():
    """What a getMore blocked on a cursor killed by a state transition gets (error_codes.yml)."""
    return SimError(11602, "InterruptedDueToReplStateChange",
                    "operation was interrupted because of a replica set state change")


def roll_back(cl, old_primary, reuse_ts=False):
    """Roll the set back to its frozen majority point (caller holds cl.lock). old_primary: the
    Member that took the writes (its cursors are killed). reuse_ts: set the clock back to the
    common point, so that the new primary's next entries take the rolled-back entries'
    timestamps (with the new term): a new primary whose clock had not seen the old primary's
    last cluster times does so; the clock is the deployment's, so this is for a replica set.
    Returns a summary dict: the common point, how many oplog entries and document writes
    were undone, the first and last rolled-back ts (None when nothing was past the point),
    the cursors killed."""
    point = cl.majority_frozen
    oplog = cl.oplog
    out = {"commonPoint": None, "entries": 0, "documents": 0, "first": None, "last": None, "cursors": 0}
    if point is None:
        return out
    out["commonPoint"] = key_ts(point)
    i = oplog.index_after(point)
    gone = oplog.entries[i:]
    _check(cl, point, gone)
    if gone:
        out["first"], out["last"] = gone[0]["ts"], gone[-1]["ts"]
    # documents: undo the newest writes first (recover to the stable timestamp)
    j = bisect.bisect_right(cl.undo_keys, point)
    for k in range(len(cl.undo) - 1, j - 1, -1):
        db, cn, key, old = cl.undo[k]
        c = cl.get_coll(db, cn)
        if c is None:
            continue
        if old is None:
            c.docs.pop(key, None)
        else:
            c.docs[key] = old
    out["documents"] = len(cl.undo) - j
    del cl.undo_keys[j:]
    del cl.undo[j:]
    del cl.undo_wall[j:]
    # collections created past the point never existed on the new primary
    for e in gone:
        if e["op"] == "c" and "create" in e["o"]:
            db = e["ns"].split(".", 1)[0]
            c = cl.get_coll(db, e["o"]["create"])
            if c is not None and c.uuid == e.get("ui"):
                del cl.store[db][e["o"]["create"]]
    # the oplog after the common point (the oplogTruncateAfterPoint)
    out["entries"] = len(gone)
    oplog.total -= sum(oplog.sizes[i:])
    del oplog.entries[i:]
    del oplog.keys[i:]
    del oplog.sizes[i:]
    for k in [k for k in oplog.images if k[0] > point]:
        del oplog.images[k]
    cl.poison_keys = set(k for k in cl.poison_keys if k <= point)
    # "if we have rolled back any operations, we invalidate all sessions on this server"
    if gone:
        cl.sessions.clear()
    out["cursors"] = _interrupt_cursors(old_primary)
    if reuse_ts and gone:
        # the next tick gives the first rolled-back entry's ts: the clock stands at the common
        # point, its wall second at that entry's second
        first = gone[0]["ts"]
        cl.clock.last = key_ts(point)
        if cl.clock.manual:
            cl.clock.offset = float(first.time)
        else:
            cl.clock.offset += first.time - int(cl.clock.wall())
    cl.majority_frozen = None
    cl.oplog_cond.notify_all()
    return out


def wait_majority(cl, ts, max_time_ms=None):
    """Blocks (releasing cl.lock) until the majority commit point reaches ts: what a read at
    afterClusterTime / atClusterTime past the commit point does on a server. 50
    MaxTimeMSExpired after max_time_ms (none: an hour, the simulator's bound)."""
    if not hasattr(cl, "majority_key"):  # mongos: the shards answer for their data
        return
    deadline = time.time() + (max_time_ms / 1000.0 if max_time_ms else 3600.0)
    while cl.majority_key() < ts_key(ts):
        rem = deadline - time.time()
        if rem <= 0 or cl.stopping:
            raise SimError(50, "MaxTimeMSExpired", "operation exceeded time limit")
        cl.oplog_cond.wait(min(rem, 0.05))


def majority_view(cl, db, coll, read_concern, max_time_ms=None):
    """The documents of db.coll a readConcern {level: "majority"} read sees (a list), or None
    when the read sees the newest data (another level, or the commit point at the newest
    entry). A majority read returns the data as of the majority commit point, never a write
    that could still be rolled back (MongoDB manual, read concern "majority"); with
    afterClusterTime T it first waits until the commit point reaches T (causal consistency),
    failing with 50 MaxTimeMSExpired after max_time_ms. Caller holds cl.lock."""
    rc = read_concern or {}
    if rc.get("level") != "majority" or not hasattr(cl, "majority_key"):  # mongos: no oplog
        return None
    after = rc.get("afterClusterTime")
    if after is not None:
        wait_majority(cl, after, max_time_ms)
    point = cl.majority_key()
    if point >= cl.oplog.last_key:
        return None
    return cl.snapshot_docs(db, coll, key_ts(point))


def majority_doc(cl, db, coll, id_key):
    """The document with _id key id_key as a majority read sees it, or None: what a change
    stream's updateLookup returns (the lookup runs at the stream's majority read concern)."""
    if cl.majority_key() < cl.oplog.last_key:
        for d in cl.snapshot_docs(db, coll, key_ts(cl.majority_key())):
            if id_key_of(d["_id"]) == id_key:
                return d
        return None
    c = cl.get_coll(db, coll)
    return c.docs.get(id_key) if c is not None else None
