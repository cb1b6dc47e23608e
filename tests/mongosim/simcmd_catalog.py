"""Catalog and DDL commands of the MongoDB simulator (mongo-sim-spec.md §1.9, §2):
listDatabases, listCollections, listIndexes, create, drop, dropDatabase, renameCollection,
collMod, createIndexes, dropIndexes; each DDL change writes its oplog entry.
A mixin of simcommands.Dispatcher.
"""

from bson.int64 import Int64

import simbson as sb
from simbson import SimError
from simcursors import cursor_reply, ok_reply


def _name_ok(v, what):
    if not isinstance(v, str) or not v:
        raise SimError(73, "InvalidNamespace", "Invalid %s name" % what)
    return v


class CatalogCommands(object):
    """Catalog listing and DDL handlers."""

    def cmd_listDatabases(self, member, body, conn):
        cl = self.cl
        names = set(n for n, colls in cl.store.items() if colls)
        names.update(["admin", "config", "local"])
        dbs = []
        total = 0
        for n in sorted(names):
            if n == "local":
                size = cl.oplog.total
            else:
                size = sum(len(c.docs) for c in cl.store.get(n, {}).values()) * 256
            total += size
            if body.get("nameOnly"):
                dbs.append({"name": n})
            else:
                dbs.append({"name": n, "sizeOnDisk": Int64(size or 8192), "empty": False})
        flt = body.get("filter")
        if flt:
            dbs = [d for d in dbs if sb.matches(d, flt)]
        import simauth
        dbs = simauth.filter_databases(cl, conn, body, dbs)
        if body.get("nameOnly"):
            return ok_reply(databases=dbs)
        return ok_reply(databases=dbs, totalSize=Int64(total), totalSizeMb=Int64(total // 1048576))

    def _coll_infos(self, db, name_only):
        cl = self.cl
        out = []
        if db == "local":
            out.append({"name": "oplog.rs", "type": "collection"} if name_only else
                       {"name": "oplog.rs", "type": "collection",
                        "options": {"capped": True, "size": Int64(cl.oplog.cap or 990 * 1048576)},
                        "info": {"readOnly": False}})
        for name, c in sorted(cl.store.get(db, {}).items()):
            if name_only:
                out.append({"name": name, "type": "collection"})
            else:
                opts = {k: v for k, v in c.options.items() if not k.startswith("__")}
                if cl.pre_images_all and "changeStreamPreAndPostImages" not in opts:
                    # --pre-images: as if every collection had been created with the option
                    opts["changeStreamPreAndPostImages"] = {"enabled": True}
                out.append({"name": name, "type": "collection", "options": opts,
                            "info": {"readOnly": False, "uuid": c.uuid},
                            "idIndex": {"v": 2, "key": {"_id": 1}, "name": "_id_"}})
        return out

    def cmd_listCollections(self, member, body, conn):
        db = body["$db"]
        out = self._coll_infos(db, bool(body.get("nameOnly")))
        if body.get("authorizedCollections") and body.get("nameOnly"):
            import simauth
            out = simauth.filter_collections(self.cl, conn, body, out)
        flt = body.get("filter")
        if flt:
            out = [d for d in out if sb.matches(d, flt)]
        return cursor_reply(True, out, 0, "%s.$cmd.listCollections" % db)

    def cmd_listIndexes(self, member, body, conn):
        db, coll = body["$db"], body["listIndexes"]
        c = self.cl.get_coll(db, coll)
        if c is None:
            raise SimError(26, "NamespaceNotFound", "ns does not exist: %s.%s" % (db, coll))
        idx = [{"v": 2, "key": {"_id": 1}, "name": "_id_"}] + list(c.options.get("__indexes", []))
        return cursor_reply(True, idx, 0, "%s.%s" % (db, coll))

    # ------------------------------------------------------------------ DDL
    def cmd_create(self, member, body, conn):
        db, coll = body["$db"], _name_ok(body["create"], "collection")
        if self.cl.get_coll(db, coll) is not None:
            raise SimError(48, "NamespaceExists", "Collection %s.%s already exists." % (db, coll))
        opts = {k: v for k, v in body.items() if k not in ("create", "$db", "lsid", "$clusterTime", "txnNumber",
                                                         "writeConcern", "$readPreference", "autocommit",
                                                         "startTransaction", "comment")}
        self.cl.ensure_coll(db, coll, opts)
        return ok_reply()

    def cmd_drop(self, member, body, conn):
        db, coll = body["$db"], body["drop"]
        c = self.cl.get_coll(db, coll)
        if c is None:
            if self.cl.wire >= 21:
                return ok_reply(nIndexesWas=0, ns="%s.%s" % (db, coll))
            raise SimError(26, "NamespaceNotFound", "ns not found")
        self._drop(db, coll)
        return ok_reply(nIndexesWas=1, ns="%s.%s" % (db, coll))

    def _drop(self, db, coll):
        cl = self.cl
        c = cl.store[db].pop(coll)
        cl.append_entry({"op": "c", "ns": db + ".$cmd", "ui": c.uuid, "o": {"drop": coll},
                         "o2": {"numRecords": len(c.docs)}})

    def cmd_dropDatabase(self, member, body, conn):
        db = body["$db"]
        cl = self.cl
        for coll in list(cl.store.get(db, {}).keys()):
            self._drop(db, coll)
        cl.store.pop(db, None)
        cl.append_entry({"op": "c", "ns": db + ".$cmd", "o": {"dropDatabase": 1}})
        return ok_reply(dropped=db)

    def cmd_renameCollection(self, member, body, conn):
        cl = self.cl
        if body["$db"] != "admin":
            raise SimError(13, "Unauthorized", "renameCollection may only be run against the admin database.")
        src, dst = body["renameCollection"], body["to"]
        sdb, scoll = src.split(".", 1)
        ddb, dcoll = dst.split(".", 1)
        c = cl.get_coll(sdb, scoll)
        if c is None:
            raise SimError(26, "NamespaceNotFound", "Source collection %s does not exist" % src)
        target = cl.get_coll(ddb, dcoll)
        o = {"renameCollection": src, "to": dst, "stayTemp": bool(body.get("stayTemp", False))}
        if target is not None:
            if not body.get("dropTarget"):
                raise SimError(48, "NamespaceExists", "target namespace exists")
            o["dropTarget"] = target.uuid
        del cl.store[sdb][scoll]
        c.name = dcoll
        cl.store.setdefault(ddb, {})[dcoll] = c
        cl.append_entry({"op": "c", "ns": sdb + ".$cmd", "ui": c.uuid, "o": o})
        return ok_reply()

    def cmd_collMod(self, member, body, conn):
        db, coll = body["$db"], body["collMod"]
        c = self.cl.get_coll(db, coll)
        if c is None:
            raise SimError(26, "NamespaceNotFound", "ns does not exist")
        o = {"collMod": coll}
        old = {"uuid": c.uuid}
        old.update({k: v for k, v in c.options.items() if not k.startswith("__")})
        for k, v in body.items():
            if k in ("collMod", "$db", "lsid", "$clusterTime", "writeConcern", "$readPreference", "comment"):
                continue
            if k == "changeStreamPreAndPostImages" and self.cl.wire < 17:
                raise SimError(40415, "IDLUnknownField", "BSON field 'collMod.%s' is an unknown field." % k)
            c.options[k] = v
            o[k] = v
        self.cl.append_entry({"op": "c", "ns": db + ".$cmd", "ui": c.uuid, "o": o,
                              "o2": {"collectionOptions_old": old}})
        return ok_reply()

    def cmd_createIndexes(self, member, body, conn):
        db, coll = body["$db"], body["createIndexes"]
        c = self.cl.ensure_coll(db, coll)
        idx = c.options.setdefault("__indexes", [])
        before = len(idx) + 1
        for spec in body.get("indexes", []):
            if spec.get("name") == "_id_" or any(i["name"] == spec.get("name") for i in idx):
                continue
            s = {"v": 2}
            s.update(spec)
            idx.append(s)
            o = {"createIndexes": coll}
            o.update(s)
            self.cl.append_entry({"op": "c", "ns": db + ".$cmd", "ui": c.uuid, "o": o})
        return ok_reply(numIndexesBefore=before, numIndexesAfter=len(idx) + 1, createdCollectionAutomatically=False)

    def cmd_dropIndexes(self, member, body, conn):
        db, coll = body["$db"], body["dropIndexes"]
        c = self.cl.get_coll(db, coll)
        if c is None:
            raise SimError(26, "NamespaceNotFound", "ns not found")
        idx = c.options.get("__indexes", [])
        want = body.get("index")
        keep = [i for i in idx if not (want == "*" or i["name"] == want or i["key"] == want)]
        if want != "*" and len(keep) == len(idx):
            raise SimError(27, "IndexNotFound", "index not found with name [%s]" % (want,))
        c.options["__indexes"] = keep
        for spec in idx:
            if spec not in keep:
                self.cl.append_entry({"op": "c", "ns": db + ".$cmd", "ui": c.uuid,
                                      "o": {"dropIndexes": coll, "index": spec["name"]}, "o2": dict(spec)})
        return ok_reply(nIndexesWas=len(idx) + 1)
