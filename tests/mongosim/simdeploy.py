"""The running simulated deployment (mongo-sim-spec.md §1, §4, §6): its replica sets (one, or a
config server and shards), a MemberServer per member, optional mongos routers, the session
reaper and the HTTP control API (POST /<action>, JSON in and out) with the actions that write
or create users; the replica-set actions are in simcontrols (ReplicaSetControls).
"""

import sys
import threading
import time
import traceback
import uuid
from http.server import BaseHTTPRequestHandler, HTTPServer
from socketserver import ThreadingMixIn

import bson
from bson import json_util

from simvalue import SimError
import simauth
import simserver as ss
from simcommands import Dispatcher
from simcontrols import ReplicaSetControls, _ts_json
from simwire import MemberServer

# Control API bodies: relaxed Extended JSON, UUIDs as standard binary.
JSON_OPTS = json_util.JSONOptions(json_mode=json_util.JSONMode.RELAXED, tz_aware=True,
                                  uuid_representation=bson.binary.STANDARD)


class Sim(ReplicaSetControls):
    """A running simulated deployment: replica sets (one, or config + shards), their member
    servers, optional mongos routers, and the HTTP control server.

    Control actions act on one replica set, chosen by the request's "shard" field (a set
    name, or "config"); the default is the replica set itself, or the first shard."""

    def __init__(self, clusters, control_port=0, router=None):
        import collections as _c
        self.clusters = _c.OrderedDict((cl.set_name, cl) for cl in clusters)
        self.all_servers = {}
        self.dispatchers = {}
        for cl in clusters:
            self.add_cluster_servers(cl)
        self.router = router
        self.control_port = control_port
        self.control_lock = threading.Lock()
        self.httpd = None
        self.default = None
        for name, cl in self.clusters.items():
            if not cl.configsvr:
                self.default = name
                break
        self.select(self.default)

    def add_cluster_servers(self, cl):
        self.clusters[cl.set_name] = cl
        d = Dispatcher(cl)
        self.dispatchers[cl.set_name] = d
        self.all_servers[cl.set_name] = [MemberServer(self, m, cl, d) for m in cl.members]

    def select(self, name):
        if name == "mongos" and self.router is not None:
            self.cl = self.router
            self.servers = self.router.servers
            self.dispatcher = self.router.dispatcher
            return
        if name == "config":
            name = next((n for n, c in self.clusters.items() if c.configsvr), None)
        if name not in self.clusters:
            raise SimError(2, "BadValue", "unknown replica set %r" % (name,))
        self.cl = self.clusters[name]
        self.servers = self.all_servers[name]
        self.dispatcher = self.dispatchers[name]

    def start_cluster(self, cl):
        for s in self.all_servers[cl.set_name]:
            s.listen()
        with cl.lock:
            cl.append_entry({"op": "n", "ns": "", "o": {"msg": "initiating set"}})
            cl.elect(0)
        threading.Thread(target=cl.noop_loop, daemon=True, name="noop-" + cl.set_name).start()

    def start(self):
        for cl in self.clusters.values():
            self.start_cluster(cl)
        if self.router is not None:
            self.router.start()
        threading.Thread(target=self._reaper, daemon=True, name="reaper").start()
        self._start_control()

    def _reaper(self):
        # idle cursors time out after 10 minutes (cursorTimeoutMillis, spec §1.7)
        while not self.cl.stopping:
            time.sleep(5)
            with self.cl.lock:
                now = time.time()
                nodes = [m for cl in self.clusters.values() for m in cl.members]
                if self.router is not None:
                    nodes += self.router.nodes
                for m in nodes:
                    for cid in [k for k, v in m.cursors.items() if now - v.last_used > 600]:
                        del m.cursors[cid]

    def stop(self):
        for cl in self.clusters.values():
            cl.stopping = True
        if self.router is not None:
            self.router.stopping = True
        with self.cl.lock:
            self.cl.oplog_cond.notify_all()
            self.cl.topo_cond.notify_all()
        servers = [s for ss_ in self.all_servers.values() for s in ss_]
        if self.router is not None:
            servers += self.router.servers
        for s in servers:
            s.stop_listening()
            s.drop_connections()
        if self.httpd is not None:
            self.httpd.shutdown()

    def info(self):
        base = {"ready": True, "control": "http://127.0.0.1:%d" % self.control_port}
        if self.router is None:
            cl = self.cl
            hosts = ",".join(m.address for m in cl.members)
            base.update({"uri": "mongodb://%s/?replicaSet=%s" % (hosts, cl.set_name),
                         "members": [{"host": m.address, "port": m.port, "state": m.state} for m in cl.members],
                         "mongos": [], "config": [], "setName": cl.set_name, "serverVersion": cl.version})
            return base
        return self.router.info(base)

    # ---------------------------------------------------------------- actions
    def act_create_user(self, a):
        """{user, password, roles: ["read", {"role": "read", "db": "shop"}], db: "admin"}:
        createUser without credentials, for tests (needs --auth)."""
        cl = self.cl
        with cl.lock:
            simauth.create_user(cl, {"createUser": a["user"], "pwd": a["password"],
                                     "roles": a.get("roles", []), "$db": a.get("db", "admin")})
        return {}

    def act_write(self, a):
        cl = self.cl
        op = a["op"]
        with cl.lock:
            if cl.primary is None:
                raise SimError(10107, "NotWritablePrimary", "no primary")
            if op == "noop":
                for _ in range(max(1, int(a.get("count", 1)))):
                    e = cl.append_entry({"op": "n", "ns": "", "o": {"msg": a.get("msg", "control note")}})
                return {"ts": _ts_json(e["ts"])}
            if op == "txn":
                lsid = {"id": uuid.UUID(int=cl.rand.getrandbits(128), version=4)}
                t = ss.Txn(int(a.get("txnNumber", 1)))
                for sub in a["ops"]:
                    self._write_one(sub, t)
                e = ss.commit_txn(cl, lsid, t)
                return {"ts": _ts_json(e["ts"]) if e else None, "lsid": str(lsid["id"])}
            return self._write_one(a, None)

    def _write_one(self, a, txn):
        cl = self.cl
        op = a["op"]
        ns = a.get("ns", "")
        db, _, coll = ns.partition(".")
        if op == "insert":
            w = ss.Writer(cl, db, txn)
            ids = [w.insert_one(coll, d)["_id"] for d in a.get("docs", [a.get("doc")])]
            return {"inserted": len(ids), "ts": _ts_json(w.last_op_ts) if w.last_op_ts else None}
        if op == "update":
            w = ss.Writer(cl, db, txn)
            m, mod, uid, _, _ = w.update(coll, a.get("q", {}), a["u"], bool(a.get("upsert")), bool(a.get("multi")))
            return {"matched": m, "modified": mod, "ts": _ts_json(w.last_op_ts) if w.last_op_ts else None}
        if op == "delete":
            w = ss.Writer(cl, db, txn)
            n = len(w.delete(coll, a.get("q", {}), int(a.get("limit", 0))))
            return {"deleted": n, "ts": _ts_json(w.last_op_ts) if w.last_op_ts else None}
        primary = cl.primary
        body = {"$db": db}
        if op == "drop":
            body = {"drop": coll, "$db": db}
        elif op == "dropDatabase":
            body = {"dropDatabase": 1, "$db": a.get("db", db)}
        elif op == "rename":
            body = {"renameCollection": a["from"], "to": a["to"], "dropTarget": bool(a.get("dropTarget")), "$db": "admin"}
        elif op == "create":
            body = {"create": coll, "$db": db}
            body.update(a.get("options", {}))
        elif op == "collMod":
            body = {"collMod": coll, "$db": db}
            body.update(a.get("options", {}))
        else:
            raise SimError(2, "BadValue", "unknown write op %s" % op)
        name = next(iter(body))
        getattr(self.dispatcher, "cmd_" + name)(primary, body, None)
        return {"ts": _ts_json(cl.cluster_time())}

    def _start_control(self):
        sim = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _do(self, body):
                action = self.path.strip("/").split("?")[0] or "status"
                fn = getattr(sim, "act_" + action, None)
                if fn is None and sim.router is not None:
                    fn = getattr(sim.router, "act_" + action, None)
                if fn is None:
                    self._send(404, {"error": "unknown action %s" % action})
                    return
                try:
                    with sim.control_lock:
                        sim.select(body.get("shard") or sim.default)
                        out = fn(body)
                    self._send(200, out)
                except SimError as e:
                    self._send(400, {"error": e.errmsg, "code": e.code})
                except Exception as e:
                    traceback.print_exc(file=sys.stderr)
                    self._send(500, {"error": repr(e)})

            def _send(self, code, obj):
                data = json_util.dumps(obj, json_options=JSON_OPTS).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._do({})

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b"{}"
                body = json_util.loads(raw.decode() or "{}", json_options=JSON_OPTS)
                self._do(body)

        class Srv(ThreadingMixIn, HTTPServer):
            daemon_threads = True

        self.httpd = Srv(("127.0.0.1", self.control_port), Handler)
        self.control_port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True, name="control").start()


def ObjectIdFactory():
    from bson.objectid import ObjectId
    return ObjectId()
