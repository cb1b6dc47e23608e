#!/usr/bin/python3
"""MongoDB simulator for mongocdc's tests: replica sets with change streams and an oplog.

Command line (prints one JSON line when ready, runs until SIGTERM/SIGINT):

    /usr/bin/python3 tests/mongosim/mongosim.py --topology replset --members 3 --base-port 0 \
        --load ../shared/datasets/sample_mflix/theaters.json[:db.coll] --server-version 6.0

    {"ready": true, "uri": "mongodb://127.0.0.1:P1,.../?replicaSet=rs0",
     "control": "http://127.0.0.1:PC", "members": [...], "mongos": [], "config": []}

From pytest (with tests/mongosim on sys.path):

    from mongosim import MongoSim
    with MongoSim(topology="replset", members=3, load=[...], server_version="6.0") as sim:
        client = sim.client()
        sim.control("stepdown")

Behaviour follows mongo-sim-spec.md (repository's shared docs); where it and real MongoDB
disagree, real MongoDB wins and SPEC-NOTES.md says so. Implementation: simvalue (codec, BSON
order, dotted paths), simquery (matching, sort, projection), simupdate (update operators,
oplog diffs), simtoken (resume tokens), simserver (replica set, store, oplog, writes), simstream
(change streams), simcommands and simcmd_* (commands), simwire (framing, envelope, faults),
simdeploy (the deployment's servers and control API), simshard / simmongos / simmerged
(sharded clusters).
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)


def _parse_args(argv):
    p = argparse.ArgumentParser(description="MongoDB simulator")
    p.add_argument("--topology", default="replset", choices=["replset", "sharded"])
    p.add_argument("--members", type=int, default=3, help="members per replica set (shards too)")
    p.add_argument("--shards", type=int, default=2, help="sharded: number of shard replica sets")
    p.add_argument("--config-members", type=int, default=1, help="sharded: config server members")
    p.add_argument("--mongos", type=int, default=1, help="sharded: number of mongos routers")
    p.add_argument("--base-port", type=int, default=0)
    p.add_argument("--set-name", default="rs0")
    p.add_argument("--load", action="append", default=[], help="FILE[:db.coll] JSON lines, Extended JSON")
    p.add_argument("--server-version", default="6.0", choices=["4.4", "5.0", "6.0", "7.0", "8.0"])
    p.add_argument("--oplog-size-mb", type=float, default=0, help="cap of local.oplog.rs (0: unbounded)")
    p.add_argument("--data-seed", type=int, default=None)
    p.add_argument("--noop-interval", type=float, default=10.0, help="periodic no-op interval in s (0: off)")
    p.add_argument("--pre-images", action="store_true", help="record pre-/post-images for every collection")
    p.add_argument("--max-event-bytes", type=int, default=16 * 1024 * 1024 + 16 * 1024,
                   help="largest change event a stream returns (real servers: 16 MiB + 16 KiB); "
                        "lower for tests of oversized events")
    p.add_argument("--auth", action="append", default=[], metavar="USER:PASSWORD[:ROLE[@DB],...]",
                   help="require SCRAM-SHA-1/256 authentication with these users; roles as MongoDB's "
                        "built-in ones (ROLE without @DB is of admin; no roles: root)")
    p.add_argument("--advertise-host", default=None,
                   help="replset: the host name members report in hello (hosts, primary, me) "
                        "instead of 127.0.0.1, e.g. one that does not resolve, as members behind "
                        "NAT or in containers; clients reach them only by the addresses of the "
                        "ready line")
    a = p.parse_args(argv)
    if not 1 <= a.members <= 7:
        p.error("--members must be between 1 and 7")
    return a


def build(args):
    """Create and start a Sim from parsed arguments; returns it after loading data."""
    import simserver
    import simdeploy
    if args.topology == "sharded":
        return build_sharded(args)
    ports = None
    if args.base_port:
        ports = [args.base_port + i for i in range(args.members)]
    cl = simserver.Cluster(members=args.members, set_name=args.set_name, server_version=args.server_version,
                           oplog_size_mb=args.oplog_size_mb, seed=args.data_seed,
                           noop_interval=args.noop_interval, pre_images=args.pre_images, ports=ports)
    cl.users, cl.user_roles = _users(args)
    cl.max_event_bytes = args.max_event_bytes
    for m in cl.members:
        m.advertise_host = args.advertise_host
    sim = simdeploy.Sim([cl], control_port=(args.base_port + args.members) if args.base_port else 0)
    sim.start()
    for spec in args.load:
        path, ns = spec, None
        if ":" in spec and not os.path.exists(spec):
            path, ns = spec.rsplit(":", 1)
        cl.load(path, ns)
    return sim


def _users(args):
    """--auth: {user: password} and {user: [(role, db)]} (simauth.py)."""
    import simauth
    users, roles = {}, {}
    for u in args.auth:
        name, pwd, r = simauth.parse_auth_arg(u)
        users[name], roles[name] = pwd, r
    return users, roles


def build_sharded(args):
    """Config server replica set + N shard replica sets + mongos routers (spec §6.1)."""
    import simserver
    import simshard
    import simdeploy
    shared = simserver.Shared(args.data_seed)
    common = dict(server_version=args.server_version, oplog_size_mb=args.oplog_size_mb, seed=args.data_seed,
                  noop_interval=args.noop_interval, pre_images=args.pre_images, shared=shared)
    cfg = simserver.Cluster(members=args.config_members, set_name="configRepl", configsvr=True, **common)
    shards = [simserver.Cluster(members=args.members, set_name="shard%02d" % (i + 1), **common)
              for i in range(args.shards)]
    sim = simdeploy.Sim([cfg] + shards, control_port=0)

    # --auth: one user table for mongos, the config servers and every shard (the same
    # credentials work on a shard directly, as capture tasks connect)
    users, roles = _users(args)
    for c in [cfg] + shards:
        c.users, c.user_roles = users, roles

    def make_shard(members):
        c = simserver.Cluster(members=members, set_name="shard%02d" % (len(sim.router.shards) + 1), **common)
        c.users, c.user_roles = users, roles
        sim.add_cluster_servers(c)
        sim.start_cluster(c)
        return c

    sim.router = simshard.Router(sim, shared, cfg, shards, args.mongos, args.server_version,
                                 seed=args.data_seed, make_shard=make_shard)
    sim.router.users, sim.router.user_roles = users, roles
    sim.start()
    for spec in args.load:
        path, ns = spec, None
        if ":" in spec and not os.path.exists(spec):
            path, ns = spec.rsplit(":", 1)
        load_via_router(sim.router, path, ns)
    return sim


def load_via_router(router, path, ns):
    """Load a JSON-lines file into the database's primary shard (unsharded collection)."""
    import simserver
    with router.lock:
        if ns is None:
            d = os.path.basename(os.path.dirname(os.path.abspath(path)))
            ns = "%s.%s" % (d, os.path.splitext(os.path.basename(path))[0])
        db = ns.split(".", 1)[0]
        prim = router.db_primary(db, create=True)
    router.shards[prim].load(path, ns)


def main(argv=None):
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    sim = build(args)
    done = threading.Event()

    def on_signal(signum, frame):
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    sys.stdout.write(json.dumps(sim.info()) + "\n")
    sys.stdout.flush()
    while not done.wait(0.5):
        pass
    sim.stop()
    return 0


class MongoSim(object):
    """Runs the simulator as a child process for a test.

    MongoSim(topology="replset", members=3, load=[path or "path:db.coll"], server_version="6.0",
    oplog_size_mb=0, data_seed=None, noop_interval=10.0, pre_images=False, start_timeout=30)
    Attributes after start: uri, control_url, members (list of "host:port"), info (ready line).
    stop() (or leaving the with block) sends SIGTERM and waits (then SIGKILL)."""

    def __init__(self, topology="replset", members=3, load=(), server_version="6.0", oplog_size_mb=0,
                 data_seed=None, noop_interval=10.0, pre_images=False, start_timeout=30, extra_args=(),
                 shards=2, mongos=1, config_members=1, auth=()):
        self.argv = [sys.executable if os.path.basename(sys.executable).startswith("python") else "/usr/bin/python3",
                     os.path.join(HERE, "mongosim.py"), "--topology", topology, "--members", str(members),
                     "--base-port", "0", "--server-version", server_version,
                     "--noop-interval", str(noop_interval)]
        if topology == "sharded":
            self.argv += ["--shards", str(shards), "--mongos", str(mongos), "--config-members", str(config_members)]
        for l in load:
            self.argv += ["--load", l]
        if oplog_size_mb:
            self.argv += ["--oplog-size-mb", str(oplog_size_mb)]
        if data_seed is not None:
            self.argv += ["--data-seed", str(data_seed)]
        if pre_images:
            self.argv.append("--pre-images")
        for a in auth:
            self.argv += ["--auth", a]
        self.argv += list(extra_args)
        self.start_timeout = start_timeout
        self.proc = None
        self.info = None
        self._clients = []

    def start(self):
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=None, text=True)
        result = {}

        def reader():
            result["line"] = self.proc.stdout.readline()

        t = threading.Thread(target=reader, daemon=True)
        t.start()
        t.join(self.start_timeout)
        line = result.get("line")
        if not line:
            self.stop()
            raise RuntimeError("simulator did not become ready within %ss" % self.start_timeout)
        self.info = json.loads(line)
        self.uri = self.info["uri"]
        self.control_url = self.info["control"]
        self.members = [m["host"] for m in self.info["members"]]
        self.mongos = self.info.get("mongos", [])
        self.shard_uris = self.info.get("shard_uris", {})
        self.config_uri = self.info.get("config_uri")
        return self

    def control(self, action, timeout=30, **kw):
        """POST a control action (see simdeploy.Sim.act_*); returns the decoded JSON reply.
        Raises RuntimeError with the simulator's message on a 4xx/5xx answer."""
        from bson import json_util
        data = json_util.dumps(kw).encode()
        req = urllib.request.Request(self.control_url + "/" + action, data=data,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return json_util.loads(r.read().decode())
        except urllib.error.HTTPError as e:
            raise RuntimeError("control %s failed: %s" % (action, e.read().decode()))

    def create_user(self, user, password, roles, db="admin"):
        """Adds a user with MongoDB built-in roles (createUser's forms: "read" of db, or
        {"role": "read", "db": "shop"}) through the control API; needs auth=[...] at start.
        A user that can read but not write the captured data: roles=[{"role": "read",
        "db": "shop"}] (plus {"role": "read", "db": "local"} for the oplog)."""
        self.control("create_user", user=user, password=password, roles=list(roles), db=db)

    def uri_for(self, user, password, auth_source="admin"):
        """The deployment's connection string with these credentials."""
        uri = self.uri.replace("mongodb://", "mongodb://%s:%s@" % (user, password), 1)
        if "?" in uri:
            return uri + "&authSource=" + auth_source
        return uri.rstrip("/") + "/?authSource=" + auth_source

    def client(self, **kw):
        """A pymongo MongoClient on the deployment (STANDARD UUIDs, short timeouts)."""
        import pymongo
        opts = dict(serverSelectionTimeoutMS=10000, uuidRepresentation="standard", connectTimeoutMS=5000)
        opts.update(kw)
        c = pymongo.MongoClient(self.uri, **opts)
        self._clients.append(c)
        return c

    def stop(self):
        for c in self._clients:
            try:
                c.close()
            except Exception:
                pass
        self._clients = []
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self.proc is not None and self.proc.stdout:
            self.proc.stdout.close()
        self.proc = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


if __name__ == "__main__":
    sys.exit(main())
