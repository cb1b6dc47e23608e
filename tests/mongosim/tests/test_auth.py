"""SCRAM authentication (--auth), as pymongo 3.11 and libmongoc 1.23 perform it."""

import pymongo
import pytest
from pymongo.errors import OperationFailure

from conftest import MongoSim, run_probe


@pytest.fixture(scope="module")
def auth_sim():
    with MongoSim(members=1, auth=["app:s3cret"], noop_interval=0) as s:
        yield s


def test_scram_with_pymongo(auth_sim):
    """Drivers' auth specification (SCRAM-SHA-1 and SCRAM-SHA-256 over saslStart /
    saslContinue, mechanism negotiated with saslSupportedMechs): right password works, a
    wrong one fails with 18 AuthenticationFailed, no credentials gets 13 Unauthorized."""
    for mech in ("SCRAM-SHA-1", "SCRAM-SHA-256"):
        c = auth_sim.client(username="app", password="s3cret", authMechanism=mech)
        c.au.c.insert_one({"mech": mech})
    assert auth_sim.client(username="app", password="s3cret").au.c.count_documents({}) == 2
    with pytest.raises(OperationFailure) as ei:
        auth_sim.client(username="app", password="nope").au.c.find_one()
    assert ei.value.code == 18
    with pytest.raises(OperationFailure) as ei:
        auth_sim.client().au.c.find_one()
    assert ei.value.code == 13
    assert auth_sim.client().admin.command("ping")["ok"] == 1.0


def test_scram_with_libmongoc_pool(auth_sim, probe):
    """The pooled libmongoc client authenticates every connection with the URI's
    credentials; a wrong password surfaces as an authentication error."""
    uri = auth_sim.uri.replace("mongodb://", "mongodb://app:s3cret@")
    rc, out, err = run_probe(probe, "crud", uri)
    assert rc == 0, (out, err)
    assert "COUNT 1" in out
    rc, out, err = run_probe(probe, "crud", uri.replace("s3cret", "bad"))
    assert rc == 3
    assert "Authentication failed" in "\n".join(out) + err


@pytest.fixture(scope="module")
def roles_sim():
    """A root user, a user with read on shop only (given by --auth USER:PASSWORD:ROLE@DB)."""
    with MongoSim(members=1, auth=["admin:pw", "reader:pw:read@shop"], noop_interval=0) as s:
        root = s.client(username="admin", password="pw")
        root.shop.orders.insert_one({"_id": 1})
        root.other.x.insert_one({"_id": 1})
        yield s


def _refused(fn):
    with pytest.raises(OperationFailure) as ei:
        fn()
    return ei.value


def test_read_role_reads_but_does_not_write(roles_sim):
    """Manual, built-in role `read`: find, changeStream, collStats, listCollections,
    listIndexes on the database's non-system collections; no insert/update/remove. Refusals
    are 13 Unauthorized, "not authorized on <db> to execute command { <command> }" (the
    server's AuthorizationSession message with the command as BSONObj::toString prints it)."""
    r = roles_sim.client(username="reader", password="pw")
    assert r.shop.orders.find_one() == {"_id": 1}
    assert r.shop.orders.count_documents({}) == 1
    assert r.shop.command("collStats", "orders")["ok"] == 1.0
    assert r.shop.list_collection_names() == ["orders"]
    with r.shop.orders.watch(max_await_time_ms=50) as cs:
        assert cs.try_next() is None
    with r.shop.watch(max_await_time_ms=50) as cs:
        assert cs.try_next() is None
    for fn in (lambda: r.shop.orders.insert_one({"_id": 2}),
               lambda: r.shop.orders.update_one({"_id": 1}, {"$set": {"a": 1}}),
               lambda: r.shop.orders.delete_one({"_id": 1})):
        e = _refused(fn)
        assert e.code == 13 and e.details["codeName"] == "Unauthorized"
        assert e.details["errmsg"].startswith("not authorized on shop to execute command { ")
        assert e.details["errmsg"].endswith(" }")
    e = _refused(lambda: r.shop.orders.insert_one({"_id": 2}))
    assert '{ insert: "orders", ' in e.details["errmsg"] and '$db: "shop"' in e.details["errmsg"]
    assert "lsid: { id: UUID(\"" in e.details["errmsg"]
    e = _refused(lambda: r.other.x.find_one())
    assert e.details["errmsg"].startswith('not authorized on other to execute command { find: "x", ')


def test_privileges_the_daemon_needs_beyond_one_database(roles_sim):
    """A whole-deployment change stream needs find+changeStream on every database
    (readAnyDatabase or more); the oplog needs find on local.oplog.rs (read on local, not
    readAnyDatabase, which leaves local out); replSetGetStatus needs clusterMonitor."""
    r = roles_sim.client(username="reader", password="pw")
    e = _refused(lambda: r.watch(max_await_time_ms=50).try_next())
    assert e.code == 13 and "not authorized on admin to execute command { aggregate: 1, pipeline: [ { $changeStream: { allChangesForCluster: true" in e.details["errmsg"]
    assert _refused(lambda: r.local.oplog.rs.find_one()).code == 13
    assert _refused(lambda: r.admin.command("replSetGetStatus")).code == 13
    root = roles_sim.client(username="admin", password="pw")
    root.admin.command("createUser", "any", pwd="pw", roles=["readAnyDatabase"])
    root.admin.command("createUser", "ops", pwd="pw",
                       roles=["clusterMonitor", {"role": "read", "db": "local"}])
    a = roles_sim.client(username="any", password="pw")
    with a.watch(max_await_time_ms=50) as cs:
        assert cs.try_next() is None
    assert a.other.x.find_one() == {"_id": 1}
    assert _refused(lambda: a.local.oplog.rs.find_one()).code == 13
    assert _refused(lambda: a.other.x.insert_one({})).code == 13
    o = roles_sim.client(username="ops", password="pw")
    assert o.admin.command("replSetGetStatus")["ok"] == 1.0
    assert o.local.oplog.rs.find_one() is not None
    assert o.local.command("collStats", "oplog.rs")["ok"] == 1.0
    assert _refused(lambda: o.shop.orders.find_one()).code == 13
    assert o.admin.command("connectionStatus")["authInfo"]["authenticatedUserRoles"] == [
        {"role": "clusterMonitor", "db": "admin"}, {"role": "read", "db": "local"}]


def test_list_databases_shows_only_authorized_ones(roles_sim):
    """listDatabases (manual): without the listDatabases action only the databases the user
    holds privileges on; authorizedDatabases: false then fails with 13."""
    r = roles_sim.client(username="reader", password="pw")
    assert r.list_database_names() == ["shop"]
    assert _refused(lambda: r.admin.command("listDatabases", authorizedDatabases=False)).code == 13
    root = roles_sim.client(username="admin", password="pw")
    assert {"admin", "local", "other", "shop"} <= set(root.list_database_names())


def test_create_user_roles_and_helpers(roles_sim):
    """createUser: roles as "name" (of the command's database) or {role, db}; an unknown role
    is 31 RoleNotFound; a second user of the same name 51003. The control API's create_user
    (MongoSim.create_user) adds one without credentials; readWrite then writes."""
    root = roles_sim.client(username="admin", password="pw")
    e = _refused(lambda: root.admin.command("createUser", "bad", pwd="x", roles=["nosuch"]))
    assert e.code == 31 and e.details["errmsg"] == "Could not find role: nosuch@admin"
    root.shop.command("createUser", "shopw", pwd="pw", roles=["readWrite"])
    e = _refused(lambda: root.shop.command("createUser", "shopw", pwd="pw", roles=[]))
    assert e.code == 51003
    assert roles_sim.client(username="shopw", password="pw", authSource="shop").shop.orders.insert_one(
        {"_id": 10}).inserted_id == 10
    roles_sim.create_user("w2", "pw", [{"role": "readWrite", "db": "other"}])
    w2 = roles_sim.client(username="w2", password="pw")
    w2.other.x.insert_one({"_id": 2})
    assert _refused(lambda: w2.shop.orders.find_one()).code == 13
    r = roles_sim.client(username="reader", password="pw")
    assert _refused(lambda: r.admin.command("createUser", "x", pwd="x", roles=[])).code == 13


def test_get_more_belongs_to_the_cursors_user(roles_sim):
    """getmore_cmd.cpp: a cursor may be continued only by the user who opened it: another
    user gets 13 "cursor id N was not created by the authenticated user"."""
    root = roles_sim.client(username="admin", password="pw")
    root.shop.many.insert_many([{"_id": i} for i in range(5)])
    roles_sim.create_user("reader2", "pw", [{"role": "read", "db": "shop"}])
    r1 = roles_sim.client(username="reader", password="pw")
    r2 = roles_sim.client(username="reader2", password="pw")
    cur = r1.shop.command("find", "many", batchSize=1)["cursor"]
    assert cur["id"] != 0
    e = _refused(lambda: r2.shop.command("getMore", cur["id"], collection="many"))
    assert e.code == 13
    assert e.details["errmsg"] == "cursor id %d was not created by the authenticated user" % cur["id"]
    assert len(list(r1.shop.many.find(batch_size=2))) == 5  # its own cursors go on


def test_roles_on_a_sharded_cluster():
    """--auth on a sharded cluster: mongos, the config servers and every shard share the
    users (a capture task connects to each shard with the same credentials); mongos checks
    the same privileges and filters listDatabases."""
    import pymongo
    with MongoSim(topology="sharded", shards=2, members=1, noop_interval=0,
                  auth=["admin:pw", "reader:pw:read@shop"]) as s:
        s.client(username="admin", password="pw").shop.orders.insert_one({"_id": 1})
        r = s.client(username="reader", password="pw")
        assert r.shop.orders.find_one() == {"_id": 1}
        e = _refused(lambda: r.shop.orders.insert_one({"_id": 2}))
        assert e.code == 13 and e.details["errmsg"].startswith('not authorized on shop to execute command { insert: "orders"')
        assert _refused(lambda: r.watch(max_await_time_ms=50).try_next()).code == 13
        assert r.list_database_names() == ["shop"]
        assert _refused(lambda: s.client().shop.orders.find_one()).code == 13
        for uri in s.shard_uris.values():
            u = uri.replace("mongodb://", "mongodb://reader:pw@", 1)
            c = pymongo.MongoClient(u + ("&" if "?" in u else "/?") + "authSource=admin",
                                    serverSelectionTimeoutMS=5000)
            try:
                c.shop.orders.find_one()
                assert _refused(lambda: c.shop.orders.insert_one({"_id": 3})).code == 13
            finally:
                c.close()
