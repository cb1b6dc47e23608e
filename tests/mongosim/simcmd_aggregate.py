"""The aggregate command of the MongoDB simulator (mongo-sim-spec.md §2, §3): the
pipeline stages it runs on a collection ($group and $bucketAuto here, the rest in simstream)
and the opening of change streams ($changeStream as the first stage).
A mixin of simcommands.Dispatcher.
"""

import copy
import functools

import simbson as sb
from simbson import SimError
import simquery
import simrollback
from simstream import ChangeStream, apply_stage, eval_expr
from simcursors import DEFAULT_BATCH, ListCursor, cursor_reply

AGGREGATE_FIELDS = {"aggregate", "pipeline", "cursor", "explain", "allowDiskUse", "maxTimeMS",
                    "bypassDocumentValidation", "readConcern", "collation", "hint", "comment",
                    "writeConcern", "let", "$db", "lsid", "$clusterTime", "txnNumber", "autocommit",
                    "startTransaction", "$readPreference", "apiVersion", "apiStrict",
                    "apiDeprecationErrors", "readPreference", "$client", "$audit"}


class AggregateCommands(object):
    """aggregate: collection pipelines and change-stream opening."""

    # ------------------------------------------------------------------ aggregate
    def cmd_aggregate(self, member, body, conn):
        db = body["$db"]
        target = body["aggregate"]
        pipeline = body.get("pipeline")
        if not isinstance(pipeline, list):
            raise SimError(14, "TypeMismatch", "'pipeline' option must be specified as an array")
        simquery.check_regex_limits(pipeline)
        for k in body:
            if k not in AGGREGATE_FIELDS:
                if self.cl.wire >= 13:
                    raise SimError(40415, "IDLUnknownField", "BSON field 'aggregate.%s' is an unknown field." % k)
                raise SimError(9, "FailedToParse", "unrecognized field '%s'" % k)
        cur_opts = body.get("cursor")
        if cur_opts is None and not body.get("explain"):
            raise SimError(9, "FailedToParse", "The 'cursor' option is required, except for aggregate with the explain argument")
        bs = (cur_opts or {}).get("batchSize")
        bs = int(bs) if bs is not None else None
        lsid = body.get("lsid")
        if pipeline and "$changeStream" in pipeline[0]:
            return self._change_stream(member, body, db, target, pipeline, bs, lsid)
        for st in pipeline[1:]:
            if "$changeStream" in st:
                raise SimError(40602, "Location40602", "$changeStream is only valid as the first stage in a pipeline.")
        self._check_read(member, body)
        if target == 1:
            raise SimError(73, "InvalidNamespace", "{aggregate: 1} is not valid for '%s' in the simulator" % pipeline[:1])
        ns = "%s.%s" % (db, target)
        rc = body.get("readConcern") or {}
        at = self._snapshot_time(rc) if rc.get("level") == "snapshot" and body.get("autocommit") is None else None
        if db == "local" and target == "oplog.rs":
            docs = list(self.cl.oplog.entries)
        elif at is not None:
            docs = [copy.deepcopy(d) for d in self.cl.snapshot_docs(db, target, at)]
        else:
            src = simrollback.majority_view(self.cl, db, target, rc, body.get("maxTimeMS"))
            if src is None:
                src = self._docs(body, db, target)
            if pipeline and isinstance(pipeline[0].get("$sample"), dict):
                # a leading $sample reads only the sampled documents (WiredTiger's random
                # cursor), so copy only those
                src = list(src)
                src = self.cl.rand.sample(src, min(int(pipeline[0]["$sample"].get("size", 0)), len(src)))
                pipeline = pipeline[1:]
            docs = [copy.deepcopy(d) for d in src]
        docs = self._run_pipeline(docs, pipeline, db, target)
        cur = ListCursor(docs)
        batch, done, _ = cur.next_batch(bs if bs is not None else DEFAULT_BATCH, 0)
        cid = 0 if done else self._register_cursor(member, ns, cur, lsid, False, False)
        return cursor_reply(True, batch, cid, ns, at_cluster_time=at)

    def _run_pipeline(self, docs, pipeline, db, coll):
        for st in pipeline:
            if len(st) != 1:
                raise SimError(40323, "Location40323", "A pipeline stage specification object must contain exactly one field.")
            name, arg = next(iter(st.items()))
            if name == "$sort":
                docs = sb.sort_docs(docs, arg)
            elif name == "$limit":
                docs = docs[:int(arg)]
            elif name == "$skip":
                docs = docs[int(arg):]
            elif name == "$count":
                docs = [{arg: len(docs)}] if docs else []
            elif name == "$group":
                docs = self._group(docs, arg)
            elif name == "$sample":
                n = int(arg.get("size", 0))
                docs = self.cl.rand.sample(docs, min(n, len(docs)))
            elif name == "$collStats":
                c = self.cl.get_coll(db, coll)
                r = {"ns": "%s.%s" % (db, coll), "host": "", "localTime": self.cl.clock.wall_dt()}
                if "count" in arg:
                    r["count"] = len(c.docs) if c else 0
                if "storageStats" in arg:
                    r["storageStats"] = {"count": len(c.docs) if c else 0, "size": 0}
                docs = [r]
            elif name == "$unwind":
                path = arg if isinstance(arg, str) else arg["path"]
                keep_empty = isinstance(arg, dict) and arg.get("preserveNullAndEmptyArrays")
                p = path[1:]
                out = []
                for d in docs:
                    v = sb.get_field(d, p)
                    if isinstance(v, list) and v:
                        for x in v:
                            n = copy.deepcopy(d)
                            sb.set_path(n, p, x)
                            out.append(n)
                    elif keep_empty or (v is not None and not isinstance(v, list)):
                        out.append(d)
                docs = out
            elif name == "$bucketAuto":
                docs = self._bucket_auto(docs, arg)
            else:
                docs = apply_stage(st, docs)
        return docs

    def _group(self, docs, spec):
        groups = []
        index = {}
        for d in docs:
            k = eval_expr(spec["_id"], d)
            ik = sb.id_key(k)
            if ik not in index:
                index[ik] = len(groups)
                groups.append((k, []))
            groups[index[ik]][1].append(d)
        out = []
        for k, members in groups:
            r = {"_id": k}
            for f, acc in spec.items():
                if f == "_id":
                    continue
                op, ex = next(iter(acc.items()))
                vals = [eval_expr(ex, d) for d in members] if op != "$count" else []
                if op == "$sum":
                    nums = [v for v in vals if sb.canon(v) == 10]
                    s = 0
                    for v in nums:
                        s = sb._add_nums(s, v)
                    r[f] = s
                elif op == "$count":
                    r[f] = len(members)
                elif op == "$avg":
                    nums = [float(sb._num(v)) for v in vals if sb.canon(v) == 10]
                    r[f] = sum(nums) / len(nums) if nums else None
                elif op in ("$min", "$max"):
                    vs = [v for v in vals if v is not None]
                    if not vs:
                        r[f] = None
                    else:
                        vs.sort(key=functools.cmp_to_key(sb.cmp_values))
                        r[f] = vs[0] if op == "$min" else vs[-1]
                elif op == "$first":
                    r[f] = vals[0] if vals else None
                elif op == "$last":
                    r[f] = vals[-1] if vals else None
                elif op == "$push":
                    r[f] = vals
                elif op == "$addToSet":
                    u = []
                    for v in vals:
                        if not any(sb.values_equal(v, x) for x in u):
                            u.append(v)
                    r[f] = u
                else:
                    raise SimError(15952, "Location15952", "unknown group operator '%s'" % op)
            out.append(r)
        return out

    def _bucket_auto(self, docs, spec):
        """$bucketAuto with the default granularity: sort by groupBy, split into `buckets`
        ranges of near-equal size without splitting equal values; count per bucket."""
        expr = spec["groupBy"]
        nb = int(spec["buckets"])
        vals = sorted(((eval_expr(expr, d), d) for d in docs), key=functools.cmp_to_key(lambda a, b: sb.cmp_values(a[0], b[0])))
        if not vals:
            return []
        per = max(1, -(-len(vals) // nb))
        out = []
        i = 0
        while i < len(vals):
            j = min(i + per, len(vals))
            while j < len(vals) and sb.values_equal(vals[j][0], vals[j - 1][0]):
                j += 1
            chunk = vals[i:j]
            maxv = vals[j][0] if j < len(vals) else chunk[-1][0]
            out.append({"_id": {"min": chunk[0][0], "max": maxv}, "count": len(chunk)})
            i = j
        return out

    def _change_stream(self, member, body, db, target, pipeline, bs, lsid):
        cl = self.cl
        spec = pipeline[0]["$changeStream"]
        if not isinstance(spec, dict):
            raise SimError(50808, "Location50808", "$changeStream stage expects a document as argument")
        self._check_read(member, body)
        if target == 1:
            if spec.get("allChangesForCluster"):
                if db != "admin":
                    raise SimError(
                        73, "InvalidNamespace", "A $changeStream with 'allChangesForCluster:true' may only be opened on the 'admin' database, and with no collection name; found %s.$cmd.aggregate" % db)
                level, coll = "cluster", None
            else:
                if db in ("admin", "config", "local"):
                    raise SimError(73, "InvalidNamespace",
                                   "$changeStream may not be opened on the internal %s database" % db)
                level, coll = "database", None
            ns = "%s.$cmd.aggregate" % db
        else:
            if spec.get("allChangesForCluster"):
                raise SimError(73, "InvalidNamespace", "A $changeStream with 'allChangesForCluster:true' may only be opened on the 'admin' database, and with no collection name; found %s.%s" % (db, target))
            if db in ("admin", "config", "local"):
                raise SimError(73, "InvalidNamespace",
                               "$changeStream may not be opened on the internal %s database" % db)
            if target.startswith("system."):
                raise SimError(73, "InvalidNamespace", "$changeStream may not be opened on the internal %s.%s collection" % (db, target))
            level, coll = "collection", target
            ns = "%s.%s" % (db, target)
        cs = ChangeStream(cl, member, level, db, coll, spec, pipeline[1:])
        batch, closed, pbrt = cs.next_batch(bs if bs is not None else DEFAULT_BATCH, 0)
        cid = 0 if closed else self._register_cursor(member, ns, cs, lsid, True, True)
        return cursor_reply(True, batch, cid, ns, pbrt)
