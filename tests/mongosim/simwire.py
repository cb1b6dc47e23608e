"""Wire protocol, reply envelope, fault injection and the HTTP control API of the simulator.

Framing (mongo-sim-spec.md §1.1-§1.3): OP_QUERY is accepted only for the `hello`/`isMaster`
handshake and heartbeats and answered with OP_REPLY; every other command arrives as OP_MSG
(kind-0 body plus kind-1 document sequences folded into the body) and is answered with one
OP_MSG whose flags are 0. moreToCome requests get no reply; exhaustAllowed is accepted and
answered without moreToCome (allowed by the SDAM spec, §2.4), after holding an awaitable hello
until the topology changes or maxAwaitTimeMS passes. Compression is never advertised.
"""

import json
import socket
import struct
import sys
import threading
import time
import traceback
import uuid
from http.server import BaseHTTPRequestHandler, HTTPServer
from socketserver import ThreadingMixIn

import bson
from bson import json_util
from bson.int64 import Int64
from bson.timestamp import Timestamp

import simvalue
from simvalue import SimError
import simauth
import simserver as ss
from simcommands import Dispatcher
from simcontrols import ReplicaSetControls, _ts_json

HELLO_NAMES = ("hello", "isMaster", "ismaster")
NO_AUTH = {"hello", "isMaster", "ismaster", "saslStart", "saslContinue", "ping", "buildInfo",
           "buildinfo", "getnonce", "logout", "endSessions"}
ALIASES = {"isMaster": "hello", "ismaster": "hello", "buildinfo": "buildInfo",
           "findandmodify": "findAndModify", "replSetGetConfig": "replSetGetStatus"}
RETRYABLE_WRITES = ("insert", "update", "delete", "findAndModify")
TRANSIENT_CODES = {251, 112, 6, 7, 89, 91, 189, 9001, 10107, 11600, 11602, 13435, 13436}
JSON_OPTS = json_util.JSONOptions(json_mode=json_util.JSONMode.RELAXED, tz_aware=True,
                                  uuid_representation=bson.binary.STANDARD)


def _recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError()
        buf += chunk
    return bytes(buf)


def _cstring(data, i):
    j = data.index(b"\x00", i)
    return data[i:j].decode("utf-8"), j + 1


class Conn(object):
    def __init__(self, server, sock):
        self.server = server
        self.sock = sock
        self.closed = False
        self.app_name = None
        self.req_seq = 0
        self.partial_next = False
        self.authenticated = None  # user name once SCRAM succeeded (--auth)
        self.scram = None

    def close(self):
        if self.closed:
            return
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass


class MemberServer(object):
    """Listening socket and connection threads of one replica-set member."""

    def __init__(self, sim, member, cl, dispatcher):
        self.sim = sim
        self.cl = cl
        self.dispatcher = dispatcher
        self.member = member
        self.listener = None

    def listen(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((self.member.host, self.member.port))
        s.listen(128)
        self.member.port = s.getsockname()[1]
        self.listener = s
        t = threading.Thread(target=self._accept_loop, args=(s,), name="accept-%d" % self.member.idx, daemon=True)
        t.start()

    def stop_listening(self):
        s, self.listener = self.listener, None
        if s is not None:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def drop_connections(self):
        with self.cl.lock:
            conns = list(self.member.conns)
            self.member.conns.clear()
            self.cl.topo_cond.notify_all()
            self.cl.oplog_cond.notify_all()
        for c in conns:
            c.close()
        return len(conns)

    def _accept_loop(self, lsock):
        while True:
            try:
                sock, _ = lsock.accept()
            except OSError:
                return
            if not self.member.reachable or self.cl.stopping:
                sock.close()
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            c = Conn(self, sock)
            with self.cl.lock:
                self.member.conns.add(c)
                self.member.conn_counter += 1
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    # ---------------------------------------------------------------------------------
    def _serve(self, c):
        try:
            while not c.closed:
                hdr = _recv_exact(c.sock, 16)
                length, req_id, _resp_to, opcode = struct.unpack("<iiii", hdr)
                if length < 16 or length > 48000000:
                    break
                data = _recv_exact(c.sock, length - 16)
                if opcode == ss.OP_QUERY:
                    self._op_query(c, req_id, data)
                elif opcode == ss.OP_MSG:
                    self._op_msg(c, req_id, data)
                else:
                    break  # legacy opcodes and OP_COMPRESSED (never negotiated): close
        except (EOFError, OSError, ConnectionError):
            pass
        except Exception:
            traceback.print_exc(file=sys.stderr)
        finally:
            c.close()
            with self.cl.lock:
                self.member.conns.discard(c)

    def _send(self, c, opcode, resp_to, payload):
        if c.closed:
            return
        c.req_seq += 1
        msg = struct.pack("<iiii", 16 + len(payload), (self.member.idx << 24) | (c.req_seq & 0xFFFFFF),
                          resp_to, opcode) + payload
        if c.partial_next:
            c.sock.sendall(msg[:len(msg) // 2])
            c.close()
            return
        c.sock.sendall(msg)

    def _op_query(self, c, req_id, data):
        flags = struct.unpack_from("<i", data, 0)[0]
        ns, i = _cstring(data, 4)
        _skip, _nret = struct.unpack_from("<ii", data, i)
        i += 8
        size = struct.unpack_from("<i", data, i)[0]
        query = simvalue.decode(data[i:i + size])
        if "$query" in query:
            query = query["$query"]
        name = next(iter(query)) if query else ""
        if ns.endswith(".$cmd") and name in HELLO_NAMES:
            query = dict(query)
            query["$db"] = ns.split(".", 1)[0]
            reply = self.dispatch(c, query, secondary_ok=bool(flags & 4))
        else:
            reply = self._error_doc(SimError(352, "UnsupportedOpQueryCommand",
                                             "Unsupported OP_QUERY command: %s. The client driver may require an upgrade. For more details see https://dochub.mongodb.org/core/legacy-opcode-removal" % name))
        if reply is None:
            c.close()
            return
        doc = simvalue.encode(reply)
        payload = struct.pack("<iqii", 8, 0, 0, 1) + doc
        self._send(c, ss.OP_REPLY, req_id, payload)

    def _op_msg(self, c, req_id, data):
        flags = struct.unpack_from("<I", data, 0)[0]
        end = len(data) - (4 if flags & 1 else 0)
        i = 4
        body = None
        seqs = {}
        while i < end:
            kind = data[i]
            i += 1
            if kind == 0:
                size = struct.unpack_from("<i", data, i)[0]
                body = simvalue.decode(data[i:i + size])
                i += size
            elif kind == 1:
                size = struct.unpack_from("<i", data, i)[0]
                sec_end = i + size
                ident, j = _cstring(data, i + 4)
                docs = []
                while j < sec_end:
                    dsz = struct.unpack_from("<i", data, j)[0]
                    docs.append(simvalue.decode(data[j:j + dsz]))
                    j += dsz
                seqs[ident] = docs
                i = sec_end
            else:
                raise EOFError()
        if body is None:
            raise EOFError()
        more_to_come = bool(flags & 2)
        if any(k in body for k in seqs):
            reply = self._error_doc(SimError(40, "ConflictingOperationInProgress",
                                             "Duplicate field %s in OP_MSG body and sequence" % list(seqs)))
        else:
            body.update(seqs)
            if "$db" not in body:
                reply = self._error_doc(SimError(40571, "Location40571", "OP_MSG requests require a $db argument"))
            else:
                reply = self.dispatch(c, body)
        if reply is None:
            c.close()
            return
        if more_to_come:
            return
        payload = struct.pack("<I", 0) + b"\x00" + simvalue.encode(reply)
        self._send(c, ss.OP_MSG, req_id, payload)

    # ---------------------------------------------------------------------------------
    def _error_doc(self, e, labels=None):
        r = {"ok": 0.0, "errmsg": e.errmsg or ss.CODE_NAMES.get(e.code, "error"), "code": int(e.code) or 1,
             "codeName": e.code_name or ss.CODE_NAMES.get(e.code, "Error%d" % e.code)}
        if labels:
            r["errorLabels"] = labels
        if e.code in ss.STATE_CHANGE_CODES:
            r["topologyVersion"] = self.member.topology_version()
        r.update(e.extra)
        return r

    def _labels(self, e, name, body, is_cs):
        if e.labels is not None:
            return list(e.labels)
        labels = []
        if is_cs:
            if e.code in ss.RESUMABLE_CODES:
                labels.append("ResumableChangeStreamError")
            elif e.code in (280, 286):
                labels.append("NonResumableChangeStreamError")
        if body.get("autocommit") is False and name not in ("commitTransaction", "abortTransaction"):
            if e.code in TRANSIENT_CODES:
                labels.append("TransientTransactionError")
        elif self.cl.wire >= 9 and e.code in ss.RETRYABLE_WRITE_CODES and (
                (name in RETRYABLE_WRITES and "txnNumber" in body) or name in ("commitTransaction", "abortTransaction")):
            labels.append("RetryableWriteError")
        return labels

    def _is_change_stream_cmd(self, name, body):
        if name == "aggregate":
            p = body.get("pipeline")
            return bool(p) and isinstance(p[0], dict) and "$changeStream" in p[0]
        if name == "getMore":
            ce = self.member.cursors.get(int(body.get("getMore", 0)))
            return bool(ce and ce.is_change_stream)
        return False

    def dispatch(self, c, body, secondary_ok=False):
        """Run one command; returns the reply document, or None to close the connection."""
        cl = self.cl
        member = self.member
        raw_name = next(iter(body))
        name = ALIASES.get(raw_name, raw_name)
        if name == "hello" and isinstance(body.get("client"), dict):
            app = body["client"].get("application") or {}
            c.app_name = app.get("name")
        # delays and injected failures (fault hooks, spec §8.2)
        rule = None
        delay = None
        with cl.lock:
            cl.counters[raw_name] += 1
            cl.member_counters[member.idx][raw_name] += 1
            d = cl.delays.get(name) or cl.delays.get(raw_name)
            if d and (d.get("member") is None or d["member"] == member.idx):
                delay = d["ms"]
                if d.get("times") is not None:
                    d["times"] -= 1
                    if d["times"] <= 0:
                        cl.delays.pop(name, None)
                        cl.delays.pop(raw_name, None)
            for r in list(cl.fail_rules):
                cmds = r.commands
                hit = (name in cmds or raw_name in cmds) if cmds is not None else \
                    (name not in ("hello", "configureFailPoint"))
                if not hit or (r.member is not None and r.member != member.idx) or \
                        (r.app_name is not None and r.app_name != c.app_name):
                    continue
                if r.skip > 0:
                    r.skip -= 1
                    continue
                rule = r
                if r.times is not None:
                    r.times -= 1
                    if r.times <= 0:
                        cl.fail_rules.remove(r)
                break
        # a write that was in flight on the primary when it stepped down fails with 11602
        # (spec §2.6 step 1); one that arrives afterwards gets 10107
        was_primary = member.state == "PRIMARY"
        if member.black_hole:
            # a hung host: accept the request, never answer (until the hole closes)
            with cl.lock:
                while member.black_hole and not c.closed and not cl.stopping:
                    cl.topo_cond.wait(0.5)
            return None
        if delay:
            time.sleep(delay / 1000.0)
        if rule is not None:
            if rule.partial:
                c.partial_next = True
            if rule.block_ms:
                time.sleep(rule.block_ms / 1000.0)
            if rule.close and not rule.after_apply:
                return None
        with cl.lock:
            if not member.reachable or c.closed:
                return None
            is_cs = self._is_change_stream_cmd(name, body)
            wce = None
            try:
                if rule is not None and rule.code is not None:
                    raise SimError(int(rule.code), rule.code_name or ss.CODE_NAMES.get(int(rule.code), "Error%d" % rule.code),
                                   rule.errmsg or "Failing command via 'failCommand' failpoint", rule.labels)
                if rule is not None and rule.wce:
                    wce = rule.wce
                if was_primary and member.state != "PRIMARY" and name in ss_write_names():
                    raise SimError(11602, "InterruptedDueToReplStateChange",
                                   "operation was interrupted because of a replica set state change")
                if getattr(cl, "users", None) and not c.authenticated and raw_name not in NO_AUTH:
                    raise SimError(13, "Unauthorized", "command %s requires authentication" % raw_name)
                if getattr(cl, "users", None) and c.authenticated:
                    simauth.authorize(cl, c, name, body)  # the user's roles (simauth.py)
                self.dispatcher.cur_member = member  # handlers run under the cluster lock
                self.dispatcher.cur_conn = c
                h = getattr(self.dispatcher, "cmd_" + name, None)
                if h is None:
                    raise SimError(59, "CommandNotFound", "no such command: '%s'" % raw_name)
                if name == "hello":
                    reply = h(member, body, c, raw_name if raw_name != "isMaster" else "isMaster")
                else:
                    reply = h(member, body, c)
                if wce is not None and name in ss_write_names():
                    reply["writeConcernError"] = wce
            except SimError as e:
                reply = self._error_doc(e, self._labels(e, name, body, is_cs))
            except Exception as e:  # a simulator bug must not look like success to the client
                traceback.print_exc(file=sys.stderr)
                reply = self._error_doc(SimError(1, "InternalError", "simulator error: %r" % (e,)))
            if rule is not None and rule.close and rule.after_apply:
                return None
            op_time = reply.pop("__opTime", None)
            reply["$clusterTime"] = {"clusterTime": cl.cluster_time(), "signature": ss.ZERO_SIG}
            reply["operationTime"] = op_time or cl.cluster_time()
            return reply


def ss_write_names():
    return ("insert", "update", "delete", "findAndModify", "commitTransaction")


# -------------------------------------------------------------------------------------
# control API

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
