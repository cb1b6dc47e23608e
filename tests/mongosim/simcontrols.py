"""The replica-set part of the simulator's HTTP control API (README "Control API"): status,
counters, elections and rollbacks, members leaving and joining, faults, the oplog, the clock.
A mixin of simdeploy.Sim (which holds cl, servers and dispatcher)."""

import time

from bson.timestamp import Timestamp

import simserver as ss
from simvalue import SimError


def _ts_json(ts):
    return {"t": ts.time, "i": ts.inc}


class ReplicaSetControls(object):
    """act_<name>(body) handlers for POST /<name>; each returns a JSON-able dict."""

    def member_arg(self, a, default_primary=True):
        m = a.get("member")
        if m is None:
            p = self.cl.primary
            if p is None or not default_primary:
                raise SimError(2, "BadValue", "no member given and no primary")
            return p.idx
        if isinstance(m, str):
            for x in self.cl.members:
                if x.address == m:
                    return x.idx
            raise SimError(2, "BadValue", "unknown member %s" % m)
        return int(m)

    def act_status(self, a):
        cl = self.cl
        with cl.lock:
            return {"members": [{"idx": m.idx, "host": m.address, "state": m.state, "reachable": m.reachable,
                                 "counter": m.counter, "processId": str(m.process_id),
                                 "cursors": len(m.cursors), "connections": len(m.conns)} for m in cl.members],
                    "term": cl.term, "oplog": {"count": len(cl.oplog.entries), "bytes": cl.oplog.total,
                                               "first": _ts_json(cl.oplog.entries[0]["ts"]) if cl.oplog.entries else None,
                                               "last": _ts_json(cl.oplog.entries[-1]["ts"]) if cl.oplog.entries else None},
                    "clusterTime": _ts_json(cl.cluster_time())}

    def act_counters(self, a):
        cl = self.cl
        with cl.lock:
            out = {"commands": dict(cl.counters),
                   "per_member": {str(k): dict(v) for k, v in cl.member_counters.items()},
                   "open_cursors": {str(m.idx): len(m.cursors) for m in cl.members},
                   "open_change_streams": {str(m.idx): sum(1 for c in m.cursors.values() if c.is_change_stream)
                                           for m in cl.members},
                   "connections": {str(m.idx): len(m.conns) for m in cl.members}}
            if a.get("reset"):
                cl.counters.clear()
                cl.member_counters.clear()
            return out

    def act_stepdown(self, a):
        elect = a.get("elect", "next")
        new = self.cl.step_down(elect=elect, no_primary_ms=int(a.get("no_primary_ms", 0)),
                                stepping_ms=int(a.get("stepping_ms", 0)), rollback="reuse_ts" if a.get("rollback") and a.get("reuse_ts")
                                else bool(a.get("rollback")))
        if not a.get("rollback"):
            return {"elected": new}
        rb = self.cl.last_rollback
        return {"elected": new, "rollback": {k: (_ts_json(v) if k in ("commonPoint", "first", "last") and v is not None else v)
                                             for k, v in rb.items()}}

    def act_hide_member(self, a):
        """Reconfig a secondary as hidden (priority 0): setVersion + 1, out of every host
        list, hello says passive/hidden, clients classify it RSOther (spec §2.3)."""
        idx = self.member_arg(a, False)
        cl = self.cl
        with cl.lock:
            m = cl.members[idx]
            if m.state == "PRIMARY":
                raise SimError(2, "BadValue", "step the primary down before hiding it")
            m.hidden = bool(a.get("hidden", True))
            cl.set_version += 1
            for x in cl.members:
                cl.bump(x)
        return {"member": idx, "hidden": m.hidden, "setVersion": cl.set_version}

    def act_elect(self, a):
        self.cl.elect(self.member_arg(a, False))
        return {"primary": self.cl.primary.idx}

    def act_drop_connections(self, a):
        n = 0
        targets = [self.member_arg(a)] if a.get("member") is not None else range(len(self.servers))
        for i in targets:
            n += self.servers[i].drop_connections()
        return {"dropped": n}

    def act_unreachable(self, a):
        idx = self.member_arg(a)
        cl = self.cl
        srv = self.servers[idx]
        with cl.lock:
            m = cl.members[idx]
            m.reachable = False
            was_primary = m.state == "PRIMARY"
        srv.stop_listening()
        srv.drop_connections()
        elected = None
        if was_primary:
            with cl.lock:
                m.state = "SECONDARY"
                cl.bump(m)
                others = [x.idx for x in cl.members if x.reachable and not x.removed]
            if others and a.get("elect", True):
                elected = others[0]
                cl.elect(elected)
        return {"member": idx, "elected": elected}

    def act_reachable(self, a):
        idx = self.member_arg(a, False)
        cl = self.cl
        with cl.lock:
            m = cl.members[idx]
            if a.get("restart"):
                m.process_id = cl.new_oid()
                m.counter = 0
                m.cursors.clear()
                if m.state == "PRIMARY":
                    m.state = "SECONDARY"
            m.reachable = True
            cl.topo_cond.notify_all()
        if self.servers[idx].listener is None:
            self.servers[idx].listen()
        return {"member": idx}

    def act_restart(self, a):
        self.act_unreachable(a)
        a = dict(a)
        a["restart"] = True
        if a.get("member") is None:
            raise SimError(2, "BadValue", "restart needs a member")
        return self.act_reachable(a)

    def act_delay(self, a):
        cmd = a["command"]
        ms = int(a.get("ms", 0))
        with self.cl.lock:
            if ms <= 0:
                self.cl.delays.pop(cmd, None)
            else:
                self.cl.delays[cmd] = {"ms": ms, "member": a.get("member"), "times": a.get("times"),
                                      "collection": a.get("collection"), "command": cmd}
            self.cl.topo_cond.notify_all()  # a held reply whose delay went goes now
        return {"delays": {k: v["ms"] for k, v in self.cl.delays.items()}}

    def act_delays(self, a):
        with self.cl.lock:
            return {k: {"ms": v["ms"], "hits": v.get("hits", 0), "waiting": v.get("waiting", 0)}
                    for k, v in self.cl.delays.items()}

    def act_fail(self, a):
        spec = dict(a)
        if "commands" in spec and isinstance(spec["commands"], str):
            spec["commands"] = [spec["commands"]]
        if spec.get("code") is None and not spec.get("closeConnection") and not spec.get("blockTimeMS") \
                and not spec.get("writeConcernError") and not spec.get("partialReply"):
            raise SimError(2, "BadValue", "fail needs code, closeConnection, blockTimeMS or writeConcernError")
        if "times" not in spec:
            spec["times"] = 1
        with self.cl.lock:
            self.cl.fail_rules.append(ss.FailRule(spec))
            return {"rules": len(self.cl.fail_rules)}

    def act_clear_faults(self, a):
        with self.cl.lock:
            self.cl.fail_rules = []
            self.cl.delays = {}
            self.cl.topo_cond.notify_all()
        return {}

    def act_truncate_oplog(self, a):
        before = a.get("before")
        if isinstance(before, dict) and "t" in before:
            before = Timestamp(int(before["t"]), int(before.get("i", 0)))
        n = self.cl.truncate_oplog(before=before, count=a.get("count"), keep=a.get("keep"))
        return {"removed": n, "oldest": _ts_json(self.cl.oplog.entries[0]["ts"])}

    def act_kill_cursors(self, a):
        n = 0
        with self.cl.lock:
            for m in self.cl.members:
                for cid in list(m.cursors):
                    ce = m.cursors[cid]
                    if a.get("kind") == "changeStream" and not ce.is_change_stream:
                        continue
                    if a.get("id") is not None and int(a["id"]) != cid:
                        continue
                    del m.cursors[cid]
                    n += 1
        return {"killed": n}

    def act_add_member(self, a):
        """Reconfig: a new secondary joins (setVersion + 1, every member's topologyVersion
        moves so monitors see the new host list, spec §2.4/§2.5)."""
        from simwire import MemberServer  # simwire imports this module: import at call time
        cl = self.cl
        with cl.lock:
            m = ss.Member(len(cl.members), cl.host, 0)
            m.process_id = cl.new_oid()
            srv = MemberServer(self, m, cl, self.dispatcher)
            srv.listen()
            cl.members.append(m)
            self.servers.append(srv)
            cl.set_version += 1
            for x in cl.members:
                cl.bump(x)
        return {"member": m.idx, "host": m.address, "setVersion": cl.set_version}

    def act_remove_member(self, a):
        """Reconfig: a secondary leaves the config (setVersion + 1); it keeps running and answers
        hello as a member without a valid config (RSGhost)."""
        idx = self.member_arg(a, False)
        cl = self.cl
        with cl.lock:
            m = cl.members[idx]
            if m.state == "PRIMARY":
                raise SimError(2, "BadValue", "step the primary down before removing it")
            m.removed = True
            m.state = "REMOVED"
            cl.set_version += 1
            for x in cl.members:
                cl.bump(x)
        return {"member": idx, "setVersion": cl.set_version}

    def act_lag(self, a):
        """Replication lag of a secondary in ms (0: none): its reads, oplog, change streams and
        hello lastWrite trail the primary by that much wall time."""
        idx = self.member_arg(a, False)
        with self.cl.lock:
            self.cl.members[idx].lag_ms = int(a.get("ms", 0))
        return {"member": idx, "ms": self.cl.members[idx].lag_ms}

    def act_black_hole(self, a):
        idx = self.member_arg(a)
        with self.cl.lock:
            self.cl.members[idx].black_hole = bool(a.get("on", True))
            self.cl.topo_cond.notify_all()
        return {"member": idx, "on": self.cl.members[idx].black_hole}

    def act_no_majority(self, a):
        """Freeze (on) or release (off) the majority commit point: w:1 writes still succeed,
        change streams stall and their postBatchResumeToken stops (spec §3.1, §8.2)."""
        cl = self.cl
        with cl.lock:
            cl.majority_frozen = cl.oplog.last_key if a.get("on", True) else None
            cl.oplog_cond.notify_all()
        return {"frozen": cl.majority_frozen is not None}

    def act_max_event_bytes(self, a):
        """Set the largest change event a stream returns (default 16 MiB + 16 KiB, as a real
        server): a test knob so that events of a few hundred KiB split or fail like 16 MiB
        ones would (spec §3.12). Returns the previous and the new value."""
        with self.cl.lock:
            old = self.cl.max_event_bytes
            self.cl.max_event_bytes = int(a.get("bytes", 16 * 1024 * 1024 + 16 * 1024))
            return {"previous": old, "bytes": self.cl.max_event_bytes}

    def act_poison_event(self, a):
        """The next write's change event counts as 16793699 bytes (over 16 MiB) once the
        stream's stages have run: streams reaching it fail with 10334 BSONObjectTooLarge, again
        after every resume, unless a stage drops it (spec §3.12)."""
        with self.cl.lock:
            self.cl.poison_pending = True
        return {}

    def act_txn_split(self, a):
        """Operations per applyOps entry for later transactions (0: one entry)."""
        with self.cl.lock:
            self.cl.txn_ops_per_entry = int(a.get("ops_per_entry", 0))
        return {}

    def act_clock(self, a):
        """Move the simulated wall clock forward by `advance` seconds (cluster times follow)."""
        with self.cl.lock:
            self.cl.clock.offset += float(a.get("advance", 0))
            return {"wall": self.cl.clock.wall()}

    def act_noop_interval(self, a):
        self.cl.noop_interval = float(a.get("seconds", 10))
        return {}
