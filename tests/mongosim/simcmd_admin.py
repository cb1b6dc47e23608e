"""Handshake, authentication, status and replica-set administration commands of the
MongoDB simulator (mongo-sim-spec.md §1.6.4, §1.7, §5): hello and its aliases, SASL, users,
serverStatus, replSetGetStatus, step-down / step-up, oplog resize and notes, the failCommand
fail point. A mixin of simcommands.Dispatcher (which holds cl and the shared checks).
"""

import time

from bson.int64 import Int64

import simbson as sb
from simbson import SimError
import simserver as ss
from simcursors import ok_reply


class AdminCommands(object):
    """hello, authentication, status and replica-set administration handlers."""

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
