"""SCRAM-SHA-1 / SCRAM-SHA-256 authentication for the simulator (RFC 5802, RFC 7677; MongoDB's
SCRAM conversation over saslStart/saslContinue as in the drivers' auth specification).

Enabled with --auth USER:PASSWORD. Unauthenticated connections may only run the handshake,
ping, buildInfo and the SASL commands; everything else gets 13 Unauthorized, as a server with
authorization enabled answers.
"""

import base64
import hashlib
import hmac
import os

from bson.binary import Binary

from simbson import SimError

NO_AUTH_COMMANDS = {"hello", "isMaster", "ismaster", "saslStart", "saslContinue", "ping", "buildInfo",
                    "buildinfo", "getnonce", "logout", "endSessions"}
ITERATIONS = {"SCRAM-SHA-1": 10000, "SCRAM-SHA-256": 15000}


def _parse(msg):
    out = {}
    for part in msg.split(","):
        if len(part) >= 2 and part[1] == "=":
            out[part[0]] = part[2:]
    return out


def _user_name(n):
    return n.replace("=2C", ",").replace("=3D", "=")


class Scram(object):
    """Server side of one SCRAM conversation."""

    def __init__(self, users, mechanism):
        if mechanism not in ITERATIONS:
            raise SimError(2, "BadValue", "Unsupported mechanism %s" % mechanism)
        self.users = users
        self.mech = mechanism
        self.hash = hashlib.sha1 if mechanism == "SCRAM-SHA-1" else hashlib.sha256
        self.done = False
        self.user = None

    def _salted(self, user):
        pw = self.users[user]
        if self.mech == "SCRAM-SHA-1":
            pw = hashlib.md5(("%s:mongo:%s" % (user, pw)).encode()).hexdigest()
        # servers use a salt of digest size - 4 bytes (16 for SHA-1, 28 for SHA-256); libmongoc
        # rejects any other length
        salt = hashlib.sha256(("salt:" + user + self.mech).encode()).digest()[:self.hash().digest_size - 4]
        return salt, hashlib.pbkdf2_hmac(self.hash().name, pw.encode(), salt, ITERATIONS[self.mech])

    def start(self, payload):
        msg = bytes(payload).decode()
        if not msg.startswith("n,,"):
            raise SimError(18, "AuthenticationFailed", "Authentication failed.")
        self.client_first_bare = msg[3:]
        f = _parse(self.client_first_bare)
        self.user = _user_name(f.get("n", ""))
        if self.user not in self.users:
            raise SimError(18, "AuthenticationFailed", "Authentication failed.")
        salt, self.salted = self._salted(self.user)
        self.nonce = f["r"] + base64.b64encode(os.urandom(18)).decode()
        self.server_first = "r=%s,s=%s,i=%d" % (self.nonce, base64.b64encode(salt).decode(), ITERATIONS[self.mech])
        return self.server_first.encode()

    def step(self, payload):
        msg = bytes(payload).decode()
        if self.done:
            return b""
        f = _parse(msg)
        if f.get("r") != self.nonce or "p" not in f:
            raise SimError(18, "AuthenticationFailed", "Authentication failed.")
        without_proof = msg[:msg.rindex(",p=")]
        auth_message = ",".join([self.client_first_bare, self.server_first, without_proof]).encode()
        client_key = hmac.new(self.salted, b"Client Key", self.hash).digest()
        stored_key = self.hash(client_key).digest()
        signature = hmac.new(stored_key, auth_message, self.hash).digest()
        proof = base64.b64decode(f["p"])
        recovered = bytes(a ^ b for a, b in zip(proof, signature))
        if self.hash(recovered).digest() != stored_key:
            raise SimError(18, "AuthenticationFailed", "Authentication failed.")
        server_key = hmac.new(self.salted, b"Server Key", self.hash).digest()
        self.done = True
        return ("v=" + base64.b64encode(hmac.new(server_key, auth_message, self.hash).digest()).decode()).encode()


def sasl_start(users, conn, body):
    s = Scram(users, body.get("mechanism"))
    payload = s.start(body.get("payload", b""))
    s.skip_empty = bool((body.get("options") or {}).get("skipEmptyExchange"))
    conn.scram = s
    return {"conversationId": 1, "done": False, "payload": Binary(payload, 0), "ok": 1.0}


def sasl_continue(conn, body):
    s = getattr(conn, "scram", None)
    if s is None:
        raise SimError(17, "ProtocolError", "No SASL session state found")
    was_done = s.done
    payload = s.step(body.get("payload", b""))
    done = was_done or (s.done and s.skip_empty)
    if s.done:
        conn.authenticated = s.user
    return {"conversationId": 1, "done": done, "payload": Binary(payload, 0), "ok": 1.0}
