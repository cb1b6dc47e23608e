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

from simvalue import SimError

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


# ------------------------------------------------------------------------------------------
# Authorization: built-in roles and the privileges each command needs (MongoDB manual,
# "Built-In Roles" and "Privilege Actions"). A privilege is (action, resource); a resource is
# the cluster (db None), a database (coll None), a collection, or every non-system
# collection of every database but local and config (db "*": what a whole-deployment change
# stream needs, "anyNormalResource").

READ_ACTIONS = frozenset(["find", "changeStream", "collStats", "dbStats", "listCollections",
                          "listIndexes", "killCursors", "dbHash", "indexStats"])
WRITE_ACTIONS = READ_ACTIONS | frozenset(["insert", "update", "remove", "createCollection",
                                          "dropCollection", "createIndex", "dropIndex",
                                          "renameCollectionSameDB", "convertToCapped"])
DB_ADMIN_ACTIONS = frozenset(["collMod", "collStats", "dbStats", "listCollections", "listIndexes",
                              "createCollection", "dropCollection", "dropDatabase", "createIndex",
                              "dropIndex", "convertToCapped", "indexStats"])
USER_ADMIN_ACTIONS = frozenset(["createUser", "dropUser", "grantRole", "revokeRole", "viewUser",
                                "viewRole"])
CLUSTER_MONITOR_ACTIONS = frozenset(["listDatabases", "replSetGetStatus", "replSetGetConfig",
                                     "serverStatus", "getCmdLineOpts", "getParameter", "listShards",
                                     "hostInfo", "connPoolStats", "top", "inprog", "netstat",
                                     "getLog"])
DB_ROLES = ("read", "readWrite", "dbAdmin", "userAdmin", "dbOwner")
ADMIN_ROLES = ("readAnyDatabase", "readWriteAnyDatabase", "dbAdminAnyDatabase",
               "userAdminAnyDatabase", "clusterMonitor", "root")


def _role_grants(role, rdb, action, db, coll):
    """Whether built-in role `role` of database rdb grants action on the resource."""
    if role == "root":
        return True
    if db is None:  # the cluster resource
        if role == "clusterMonitor":
            return action in CLUSTER_MONITOR_ACTIONS
        return role in ("readAnyDatabase", "readWriteAnyDatabase", "dbAdminAnyDatabase") and \
            action == "listDatabases"
    if role == "clusterMonitor":
        # stats everywhere, find on config's collections and local.system.replset; no find
        # on the oplog (the manual's clusterMonitor section)
        return action in ("collStats", "dbStats", "indexStats") or \
            (action == "find" and (db == "config" or (db == "local" and coll == "system.replset")))
    if coll is not None and coll.startswith("system."):
        return False  # the read/write roles leave system collections out
    any_db = db not in ("local", "config")
    if role in ("read", "readWrite", "dbAdmin", "userAdmin", "dbOwner") and db != rdb:
        return False
    if role in ("readAnyDatabase", "readWriteAnyDatabase", "dbAdminAnyDatabase",
                "userAdminAnyDatabase") and not any_db:
        return False
    table = {"read": READ_ACTIONS, "readWrite": WRITE_ACTIONS, "dbAdmin": DB_ADMIN_ACTIONS,
             "userAdmin": USER_ADMIN_ACTIONS, "dbOwner": WRITE_ACTIONS | DB_ADMIN_ACTIONS | USER_ADMIN_ACTIONS,
             "readAnyDatabase": READ_ACTIONS, "readWriteAnyDatabase": WRITE_ACTIONS,
             "dbAdminAnyDatabase": DB_ADMIN_ACTIONS, "userAdminAnyDatabase": USER_ADMIN_ACTIONS}
    return action in table.get(role, ())


def parse_roles(spec, default_db):
    """Roles as createUser takes them: "role" (of default_db) or {role, db}. Raises 31
    RoleNotFound for an unknown role, as the server does."""
    out = []
    for r in spec or []:
        if isinstance(r, str):
            role, db = r, default_db
        elif isinstance(r, dict) and isinstance(r.get("role"), str) and isinstance(r.get("db"), str):
            role, db = r["role"], r["db"]
        else:
            raise SimError(2, "BadValue", "Role names must be either strings or objects")
        if role not in DB_ROLES and not (role in ADMIN_ROLES and db == "admin"):
            raise SimError(31, "RoleNotFound", "Could not find role: %s@%s" % (role, db))
        out.append((role, db))
    return out


def parse_auth_arg(arg):
    """--auth USER:PASSWORD[:ROLE[@DB],...] -> (user, password, roles). Without roles the
    user gets root (the simulator's behaviour before roles existed); ROLE without @DB is of
    admin."""
    parts = arg.split(":", 2)
    if len(parts) < 2:
        raise ValueError("--auth wants USER:PASSWORD[:ROLE[@DB],...], got %r" % arg)
    if len(parts) == 2 or not parts[2]:
        return parts[0], parts[1], [("root", "admin")]
    roles = []
    for r in parts[2].split(","):
        role, _, db = r.partition("@")
        roles.append({"role": role, "db": db or "admin"})
    return parts[0], parts[1], parse_roles(roles, "admin")


def allowed(cl, user, action, db, coll=None):
    """Whether user (authenticated name) holds action on the resource (see above)."""
    roles = getattr(cl, "user_roles", {}).get(user)
    if roles is None:
        return user in getattr(cl, "users", {})  # a user without a roles entry is root
    return any(_role_grants(r, rdb, action, db, coll) for r, rdb in roles)


def can_see_db(cl, user, db):
    """listDatabases' authorizedDatabases rule: the user has some privilege on db (or on a
    collection in it)."""
    probe = READ_ACTIONS | WRITE_ACTIONS | DB_ADMIN_ACTIONS
    return any(allowed(cl, user, a, db, None) or allowed(cl, user, a, db, "x") for a in probe)


def _is_change_stream(body):
    p = body.get("pipeline")
    return bool(p) and isinstance(p[0], dict) and "$changeStream" in p[0]


def required(name, body):
    """The privileges command `name` (alias resolved) with body needs: a list of
    (action, db, coll). None for commands that need only an authenticated connection."""
    db = body.get("$db", "admin")
    target = body.get(next(iter(body)))
    coll = target if isinstance(target, str) else None
    if name == "find":
        return [("find", db, coll)]
    if name == "aggregate":
        if _is_change_stream(body):
            if coll is not None:
                return [("find", db, coll), ("changeStream", db, coll)]
            spec = body["pipeline"][0]["$changeStream"] or {}
            if spec.get("allChangesForCluster"):
                return [("find", "*", None), ("changeStream", "*", None)]
            return [("find", db, None), ("changeStream", db, None)]
        return [("find", db, coll)]
    if name in ("count", "distinct"):
        return [("find", db, coll)]
    simple = {"listIndexes": "listIndexes", "collStats": "collStats", "insert": "insert",
              "update": "update", "delete": "remove", "drop": "dropCollection",
              "collMod": "collMod", "createIndexes": "createIndex", "dropIndexes": "dropIndex"}
    if name in simple:
        return [(simple[name], db, coll)]
    if name == "findAndModify":
        return [("find", db, coll), ("remove" if body.get("remove") else "update", db, coll)]
    dbwide = {"dbStats": "dbStats", "create": "createCollection", "dropDatabase": "dropDatabase",
              "createUser": "createUser", "dropUser": "dropUser", "grantRolesToUser": "grantRole",
              "revokeRolesFromUser": "revokeRole", "usersInfo": "viewUser"}
    if name in dbwide:
        return [(dbwide[name], db, None)]
    if name == "listCollections":
        if body.get("authorizedCollections") and body.get("nameOnly"):
            return None  # lists only what the user may see (handler filters)
        return [("listCollections", db, None)]
    if name == "renameCollection":
        src, dst = str(body.get("renameCollection", ".")), str(body.get("to", "."))
        sdb, _, scoll = src.partition(".")
        ddb, _, dcoll = dst.partition(".")
        if sdb == ddb:
            return [("renameCollectionSameDB", sdb, None)]
        return [("find", sdb, scoll), ("dropCollection", sdb, scoll), ("insert", ddb, dcoll),
                ("createCollection", ddb, None)]
    if name == "listDatabases":
        return None  # authorizedDatabases (handler)
    cluster = {"replSetGetStatus": "replSetGetStatus", "serverStatus": "serverStatus",
               "getCmdLineOpts": "getCmdLineOpts", "getParameter": "getParameter",
               "replSetStepDown": "replSetStateChange", "replSetFreeze": "replSetStateChange",
               "replSetStepUp": "replSetStateChange", "replSetResizeOplog": "replSetResizeOplog",
               "appendOplogNote": "appendOplogNote", "configureFailPoint": "configureFailPoint"}
    if name in cluster:
        return [(cluster[name], None, None)]
    return None  # hello, ping, getMore, killCursors, sessions, transactions, auth


def _shell(v):
    """A value as the server's BSONObj::toString() prints it in error messages."""
    import datetime
    from bson.binary import Binary as _Bin
    from bson.int64 import Int64 as _I64
    from bson.objectid import ObjectId as _Oid
    from bson.timestamp import Timestamp as _Ts
    import uuid as _uuid
    if isinstance(v, dict):
        if not v:
            return "{}"
        return "{ " + ", ".join("%s: %s" % (k, _shell(x)) for k, x in v.items()) + " }"
    if isinstance(v, (list, tuple)):
        return "[]" if not v else "[ " + ", ".join(_shell(x) for x in v) + " ]"
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, str):
        return '"%s"' % v.replace("\\", "\\\\").replace('"', '\\"')
    if isinstance(v, _I64):
        return str(int(v))
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if v != int(v) or abs(v) >= 1e16 else "%d.0" % int(v)
    if isinstance(v, _Ts):
        return "Timestamp(%d, %d)" % (v.time, v.inc)
    if isinstance(v, _Oid):
        return "ObjectId('%s')" % v
    if isinstance(v, _uuid.UUID):
        return 'UUID("%s")' % v
    if isinstance(v, _Bin):
        if v.subtype == 4 and len(v) == 16:
            return 'UUID("%s")' % _uuid.UUID(bytes=bytes(v))
        return "BinData(%d, %s)" % (v.subtype, bytes(v).hex().upper())
    if isinstance(v, (bytes, bytearray)):
        return "BinData(0, %s)" % bytes(v).hex().upper()
    if isinstance(v, datetime.datetime):
        return "new Date(%d)" % int(v.timestamp() * 1000)
    return str(v)


def unauthorized(db, body):
    """13 Unauthorized as a server with authorization enabled answers a command the user's
    roles do not allow: "not authorized on <db> to execute command { <the command> }"."""
    return SimError(13, "Unauthorized", "not authorized on %s to execute command %s" % (db, _shell(body)))


def authorize(cl, conn, name, body):
    """Raises 13 Unauthorized unless conn's user holds every privilege `name` needs."""
    need = required(name, body)
    if not need:
        return
    user = conn.authenticated
    for action, db, coll in need:
        if not allowed(cl, user, action, db, coll):
            raise unauthorized(body.get("$db", "admin"), body)


# ------------------------------------------------------------------------------------------
# User management commands (createUser, dropUser, grantRolesToUser, revokeRolesFromUser,
# usersInfo) and the authorization-aware parts of listDatabases / listCollections /
# connectionStatus. Users are known by name alone (the authentication database is not
# kept apart): SCRAM finds them by name.

def _auth_enabled(cl):
    if not getattr(cl, "users", None):
        raise SimError(13, "Unauthorized", "Authentication is not enabled on this server")


def create_user(cl, body):
    _auth_enabled(cl)
    db, name = body["$db"], body.get("createUser")
    if not isinstance(name, str) or not name:
        raise SimError(2, "BadValue", "User name must be a non-empty string")
    if name in cl.users:
        raise SimError(51003, "Location51003", 'User "%s@%s" already exists' % (name, db))
    if not isinstance(body.get("pwd"), str):
        raise SimError(2, "BadValue", "Must provide a 'pwd' field for all user documents, except those with '$external' as the user's source db")
    roles = parse_roles(body.get("roles"), db)
    cl.users[name] = body["pwd"]
    cl.user_roles[name] = roles
    return {"ok": 1.0}


def _known(cl, body, key):
    name = body.get(key)
    if name not in cl.users:
        raise SimError(11, "UserNotFound", "Could not find user \"%s\" for db \"%s\"" % (name, body["$db"]))
    return name


def drop_user(cl, body):
    _auth_enabled(cl)
    name = _known(cl, body, "dropUser")
    del cl.users[name]
    cl.user_roles.pop(name, None)
    return {"ok": 1.0}


def grant_roles(cl, body, grant):
    _auth_enabled(cl)
    key = "grantRolesToUser" if grant else "revokeRolesFromUser"
    name = _known(cl, body, key)
    roles = parse_roles(body.get("roles"), body["$db"])
    cur = list(cl.user_roles.get(name, [("root", "admin")]))
    for r in roles:
        if grant and r not in cur:
            cur.append(r)
        elif not grant and r in cur:
            cur.remove(r)
    cl.user_roles[name] = cur
    return {"ok": 1.0}


def _role_docs(cl, user):
    return [{"role": r, "db": d} for r, d in cl.user_roles.get(user, [("root", "admin")])]


def users_info(cl, body):
    _auth_enabled(cl)
    want = body.get("usersInfo")
    names = sorted(cl.users) if want == 1 else [want] if isinstance(want, str) else \
        [w.get("user") for w in want] if isinstance(want, list) else []
    return {"users": [{"_id": "%s.%s" % (body["$db"], n), "user": n, "db": body["$db"],
                       "roles": _role_docs(cl, n),
                       "mechanisms": ["SCRAM-SHA-1", "SCRAM-SHA-256"]} for n in names if n in cl.users],
            "ok": 1.0}


def connection_status(cl, conn):
    """connectionStatus' authInfo: the authenticated user and its roles."""
    user = getattr(conn, "authenticated", None)
    if not getattr(cl, "users", None) or user is None:
        return {"authenticatedUsers": [], "authenticatedUserRoles": []}
    return {"authenticatedUsers": [{"user": user, "db": "admin"}],
            "authenticatedUserRoles": _role_docs(cl, user)}


def filter_databases(cl, conn, body, dbs):
    """listDatabases under authorization: with listDatabases on the cluster every database,
    unless authorizedDatabases is true; without it only the databases the user holds a
    privilege on, or 13 when authorizedDatabases is false (manual, listDatabases)."""
    user = getattr(conn, "authenticated", None)
    if not getattr(cl, "users", None) or user is None:
        return dbs
    flag = body.get("authorizedDatabases")
    if allowed(cl, user, "listDatabases", None) and not flag:
        return dbs
    if flag is False:
        raise unauthorized(body.get("$db", "admin"), body)
    return [d for d in dbs if can_see_db(cl, user, d["name"])]


def filter_collections(cl, conn, body, infos):
    """listCollections with authorizedCollections and nameOnly and no listCollections
    privilege: only the collections the user holds a privilege on."""
    user = getattr(conn, "authenticated", None)
    db = body["$db"]
    if not getattr(cl, "users", None) or user is None or allowed(cl, user, "listCollections", db):
        return infos
    probe = READ_ACTIONS | WRITE_ACTIONS | DB_ADMIN_ACTIONS
    return [i for i in infos if any(allowed(cl, user, a, db, i["name"]) for a in probe)]
