"""Wire protocol, reply envelope and fault injection of the simulator: one MemberServer per
replica-set member (the deployment as a whole and its HTTP control API are in simdeploy).

Framing (mongo-sim-spec.md §1.1-§1.3): OP_QUERY is accepted only for the `hello`/`isMaster`
handshake and heartbeats and answered with OP_REPLY; every other command arrives as OP_MSG
(kind-0 body plus kind-1 document sequences folded into the body) and is answered with one
OP_MSG whose flags are 0. moreToCome requests get no reply; exhaustAllowed is accepted and
answered without moreToCome (allowed by the SDAM spec, §2.4), after holding an awaitable hello
until the topology changes or maxAwaitTimeMS passes. Compression is never advertised.
"""

import socket
import struct
import sys
import threading
import time
import traceback


import simvalue
from simvalue import SimError
import simauth
import simserver as ss

HELLO_NAMES = ("hello", "isMaster", "ismaster")
NO_AUTH = {"hello", "isMaster", "ismaster", "saslStart", "saslContinue", "ping", "buildInfo",
           "buildinfo", "getnonce", "logout", "endSessions"}
ALIASES = {"isMaster": "hello", "ismaster": "hello", "buildinfo": "buildInfo",
           "findandmodify": "findAndModify", "replSetGetConfig": "replSetGetStatus"}
RETRYABLE_WRITES = ("insert", "update", "delete", "findAndModify")
TRANSIENT_CODES = {251, 112, 6, 7, 89, 91, 189, 9001, 10107, 11600, 11602, 13435, 13436}


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
        spent = False  # the delay's last use: it left cl.delays
        with cl.lock:
            cl.counters[raw_name] += 1
            cl.member_counters[member.idx][raw_name] += 1
            d = cl.delays.get(name) or cl.delays.get(raw_name)
            if d and d.get("collection") is not None and \
                    d["collection"] not in (body.get(raw_name), body.get("collection")):
                d = None  # another collection's command
            if d and (d.get("member") is None or d["member"] == member.idx):
                delay = d["ms"]
                if d.get("times") is not None:
                    d["times"] -= 1
                    if d["times"] <= 0:
                        spent = True
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
            # held until the delay is over, cleared or replaced (a test releases a held reply)
            end = time.monotonic() + delay / 1000.0
            with cl.lock:
                d["waiting"] = d.get("waiting", 0) + 1
                d["hits"] = d.get("hits", 0) + 1
                while not cl.stopping and time.monotonic() < end and \
                        (spent or cl.delays.get(d.get("command")) is d):
                    cl.topo_cond.wait(min(0.2, max(0.0, end - time.monotonic())))
                d["waiting"] -= 1
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
