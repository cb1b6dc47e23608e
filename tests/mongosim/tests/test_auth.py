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
