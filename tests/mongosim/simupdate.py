"""Update operators and the oplog's update diffs for the MongoDB simulator.

Pure functions over documents decoded with simvalue's codec: operator updates ($set, $inc,
$push ... with the positional forms `$`, `$[]`, `$[<id>]`), the `$v: 2` oplog diff of an update
(server `document_diff_serialization.h`, mongo-sim-spec.md §3.7) as computed from two documents
and as a modifier update logs it, the change event's updateDescription derived from a diff, and
the `$v: 1` form the 4.4 profile logs.
"""

import copy
import datetime
from decimal import Decimal

from bson.decimal128 import Decimal128
from bson.int64 import Int64

from simquery import _match_elem_ops, matches, sort_docs
from simvalue import (SimError, _MISSING, _num, canon, cmp_values, get_field, identical,
                      set_path, unset_path, values_equal)

# ---------------------------------------------------------------------------
# update operators

def is_operator_update(u):
    return isinstance(u, dict) and bool(u) and all(k.startswith("$") for k in u)


def _add_nums(a, b):
    if isinstance(a, Decimal128) or isinstance(b, Decimal128):
        return Decimal128(_num(a) + _num(b) if isinstance(_num(a), Decimal) and isinstance(_num(b), Decimal)
                          else Decimal(str(_num(a))) + Decimal(str(_num(b))))
    r = a + b
    if isinstance(a, float) or isinstance(b, float):
        return float(r)
    if isinstance(a, Int64) or isinstance(b, Int64) or not (-2 ** 31 <= r < 2 ** 31):
        return Int64(r)
    return int(r)


def _probe(prefix, elem):
    d = {}
    set_path(d, prefix, elem)
    return d


def expand_positional(doc, path, query=None, array_filters=None):
    """Concrete paths for an update path with `$` (first element matched by the query),
    `$[]` (every element) or `$[<id>]` (elements matching arrayFilters)."""
    parts = path.split(".")
    for i, p in enumerate(parts):
        if p == "$" or (p.startswith("$[") and p.endswith("]")):
            prefix = ".".join(parts[:i])
            rest = parts[i + 1:]
            arr = get_field(doc, prefix)
            if not isinstance(arr, list):
                raise SimError(2, "BadValue", "The positional operator did not find the match needed from the query.")
            if p == "$":
                subq = {k: v for k, v in (query or {}).items() if k == prefix or k.startswith(prefix + ".")}
                idx = [j for j, e in enumerate(arr) if subq and matches(_probe(prefix, e), subq)][:1]
                if not idx:
                    raise SimError(2, "BadValue", "The positional operator did not find the match needed from the query.")
            elif p == "$[]":
                idx = list(range(len(arr)))
            else:
                ident = p[2:-1]
                flt = None
                for f in array_filters or []:
                    if any(k == ident or k.startswith(ident + ".") for k in f):
                        flt = f
                if flt is None:
                    raise SimError(2, "BadValue", "No array filter found for identifier '%s' in path '%s'" % (ident, path))
                idx = [j for j, e in enumerate(arr) if matches({ident: e}, flt)]
            out = []
            for j in idx:
                sub = ".".join([prefix, str(j)] + rest) if prefix else ".".join([str(j)] + rest)
                out.extend(expand_positional(doc, sub, query, array_filters))
            return out
    return [path]


def apply_update(doc, update, is_upsert_insert=False, query=None, array_filters=None):
    """Apply an operator update to a deep copy of doc and return the new document.

    Supports $set $unset $inc $mul $min $max $push ($each/$slice/$position) $pull $pullAll
    $addToSet ($each) $pop $rename $currentDate $setOnInsert, and the positional forms `$`,
    `$[]`, `$[<id>]` (with arrayFilters). Raises SimError for type errors with the server's
    codes (14 TypeMismatch, 2 BadValue)."""
    new = copy.deepcopy(doc)
    for op, fields in update.items():
        if not isinstance(fields, dict):
            raise SimError(9, "FailedToParse", "Modifiers operate on fields but we found type %s instead" % type(fields).__name__)
        expanded = []
        for path, arg in fields.items():
            if "$" in path:
                expanded.extend((p, arg) for p in expand_positional(new, path, query, array_filters))
            else:
                expanded.append((path, arg))
        for path, arg in expanded:
            if path == "_id" or path.startswith("_id."):
                if op in ("$set", "$setOnInsert") and "_id" in doc and values_equal(doc.get("_id"), arg):
                    continue
                if not (op == "$setOnInsert" or is_upsert_insert and op == "$set"):
                    raise SimError(66, "ImmutableField",
                                   "Performing an update on the path '_id' would modify the immutable field '_id'")
            cur = get_field(new, path, _MISSING)
            if op == "$set":
                set_path(new, path, copy.deepcopy(arg))
            elif op == "$setOnInsert":
                if is_upsert_insert:
                    set_path(new, path, copy.deepcopy(arg))
            elif op == "$unset":
                unset_path(new, path)
            elif op in ("$inc", "$mul"):
                if canon(arg) != 10:
                    raise SimError(14, "TypeMismatch", "Cannot %s with non-numeric argument: {%s: %r}" % (op[1:], path, arg))
                if cur is _MISSING or cur is None and False:
                    set_path(new, path, arg if op == "$inc" else (arg * 0))
                elif canon(cur) != 10:
                    raise SimError(14, "TypeMismatch",
                                   "Cannot apply %s to a value of non-numeric type. {_id: %r} has the field '%s' of non-numeric type %s"
                                   % (op, doc.get("_id"), path, type(cur).__name__))
                else:
                    set_path(new, path, _add_nums(cur, arg) if op == "$inc" else _mul(cur, arg))
            elif op in ("$min", "$max"):
                if cur is _MISSING:
                    set_path(new, path, copy.deepcopy(arg))
                else:
                    c = cmp_values(arg, cur)
                    if (op == "$min" and c < 0) or (op == "$max" and c > 0):
                        set_path(new, path, copy.deepcopy(arg))
            elif op == "$currentDate":
                now = datetime.datetime.now(datetime.timezone.utc)
                now = now.replace(microsecond=(now.microsecond // 1000) * 1000)
                set_path(new, path, now)
            elif op in ("$push", "$addToSet"):
                if cur is _MISSING:
                    arr = []
                elif isinstance(cur, list):
                    arr = cur
                else:
                    raise SimError(2, "BadValue",
                                   "The field '%s' must be an array but is of type %s in document {_id: %r}"
                                   % (path, type(cur).__name__, doc.get("_id")))
                each = arg["$each"] if isinstance(arg, dict) and "$each" in arg else [arg]
                each = copy.deepcopy(each)
                if op == "$addToSet":
                    for e in each:
                        if not any(values_equal(e, x) for x in arr):
                            arr.append(e)
                else:
                    pos = arg.get("$position") if isinstance(arg, dict) else None
                    if pos is None:
                        arr.extend(each)
                    else:
                        arr[pos:pos] = each
                    if isinstance(arg, dict) and "$sort" in arg:
                        s = arg["$sort"]
                        if isinstance(s, dict):
                            arr[:] = sort_docs(arr, s)
                        else:
                            import functools
                            arr[:] = sorted(arr, key=functools.cmp_to_key(cmp_values), reverse=s < 0)
                    if isinstance(arg, dict) and "$slice" in arg:
                        n = arg["$slice"]
                        arr[:] = arr[:n] if n >= 0 else arr[n:]
                if cur is _MISSING:
                    set_path(new, path, arr)
            elif op in ("$pull", "$pullAll"):
                if isinstance(cur, list):
                    if op == "$pullAll":
                        keep = [x for x in cur if not any(values_equal(x, a) for a in arg)]
                    elif isinstance(arg, dict) and arg and all(k.startswith("$") for k in arg):
                        keep = [x for x in cur if not _match_elem_ops(x, arg)]
                    elif isinstance(arg, dict):
                        keep = [x for x in cur if not (isinstance(x, dict) and matches(x, arg))]
                    else:
                        keep = [x for x in cur if not values_equal(x, arg)]
                    cur[:] = keep
            elif op == "$pop":
                if isinstance(cur, list) and cur:
                    if arg == -1:
                        del cur[0]
                    else:
                        del cur[-1]
            elif op == "$rename":
                if cur is not _MISSING:
                    unset_path(new, path)
                    set_path(new, arg, cur)
            else:
                raise SimError(9, "FailedToParse", "Unknown modifier: %s. Expected a valid update modifier or pipeline-style update specified as an array" % op)
    return new


def _mul(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return float(_num(a) * _num(b))
    r = a * b
    if isinstance(a, Int64) or isinstance(b, Int64) or not (-2 ** 31 <= r < 2 ** 31):
        return Int64(r)
    return int(r)


# ---------------------------------------------------------------------------
# $v: 2 oplog diff (document_diff_serialization.h) and updateDescription (§3.7)

def compute_diff(old, new):
    """Document diff `{d, u, i, s<field>}` turning old into new (None if identical)."""
    d, u, i, subs = {}, {}, {}, []
    old_keys = list(old.keys())
    new_keys = list(new.keys())
    common = [k for k in old_keys if k in new]
    # the new document keeps the common fields in the old order, new fields appended
    order_ok = [k for k in new_keys if k in old] == common
    if not order_ok:
        # field order changed: log every common field as a replacement in new order
        for k in old_keys:
            if k not in new:
                d[k] = False
        for k in new_keys:
            if k in old:
                d[k] = False
                i[k] = new[k]
            else:
                i[k] = new[k]
        diff = {}
        if d:
            diff["d"] = d
        if i:
            diff["i"] = i
        return diff or None
    for k in old_keys:
        if k not in new:
            d[k] = False
    for k in common:
        a, b = old[k], new[k]
        if identical(a, b):
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            sd = compute_diff(a, b)
            if sd:
                subs.append(("s" + k, sd))
        elif isinstance(a, list) and isinstance(b, list):
            subs.append(("s" + k, _array_diff(a, b)))
        else:
            u[k] = b
    for k in new_keys:
        if k not in old:
            i[k] = new[k]
    diff = {}
    if d:
        diff["d"] = d
    if u:
        diff["u"] = u
    if i:
        diff["i"] = i
    for k, sd in subs:
        diff[k] = sd
    return diff or None


def _array_diff(a, b):
    diff = {"a": True}
    if len(b) < len(a):
        diff["l"] = len(b)
    for idx, nb in enumerate(b):
        if idx >= len(a):
            diff["u%d" % idx] = nb
            continue
        oa = a[idx]
        if identical(oa, nb):
            continue
        if isinstance(oa, dict) and isinstance(nb, dict):
            sd = compute_diff(oa, nb)
            if sd:
                diff["s%d" % idx] = sd
        elif isinstance(oa, list) and isinstance(nb, list):
            diff["s%d" % idx] = _array_diff(oa, nb)
        else:
            diff["u%d" % idx] = nb
    return diff


def modifier_diff(diff, new):
    """The diff of a modifier update ($pop, $pull, $set ...) as a real 5.0+ server logs it:
    the update nodes log whole values at the paths they change, so an array that shrinks
    ($pop, $pull, $pullAll, $set to a shorter array) is logged whole (`u: {arr: [...]}`),
    never as a truncation (`l`), which only pipeline updates produce (their diff is
    computed from the documents; MongoDB's change-event reference: truncatedArrays come
    from pipeline-based updates)."""
    def has_l(sd):
        return sd.get("a") is True and "l" in sd

    def walk_doc(df, doc):
        out, ups = {}, dict(df.get("u", {}))
        subs = []
        for k, sd in df.items():
            if k.startswith("s") and isinstance(sd, dict):
                f = k[1:]
                if has_l(sd):
                    ups[f] = doc[f]
                elif sd.get("a") is True:
                    subs.append((k, walk_arr(sd, doc[f])))
                else:
                    subs.append((k, walk_doc(sd, doc[f])))
        if "d" in df:
            out["d"] = df["d"]
        if ups:
            out["u"] = ups
        if "i" in df:
            out["i"] = df["i"]
        out.update(subs)
        return out

    def walk_arr(df, arr):
        out = {"a": True}
        for k, v in df.items():
            if k == "a":
                continue
            if k.startswith("s") and isinstance(v, dict):
                i = int(k[1:])
                if has_l(v):
                    out["u%d" % i] = arr[i]
                elif v.get("a") is True:
                    out[k] = walk_arr(v, arr[i])
                else:
                    out[k] = walk_doc(v, arr[i])
            else:
                out[k] = v
        return out

    return walk_doc(diff, new)


def diff_to_update_description(diff):
    """`$v: 2` diff -> (updatedFields, removedFields, truncatedArrays, disambiguatedPaths) (§3.7).

    disambiguatedPaths (6.1+, expanded events) maps each reported dotted path that contains a
    numeric object field name (not first) or a field name with a dot to its real components:
    array indexes as int32, field names as strings."""
    upd, rem, trunc, dis = {}, [], [], {}

    def note(comps):
        path = ".".join(str(c) for c in comps)
        amb = any(isinstance(c, str) and (("." in c) or (i > 0 and c.isdigit())) for i, c in enumerate(comps))
        if amb:
            dis[path] = list(comps)
        return path

    def walk_doc(df, comps):
        for key in ("u", "i", "b"):
            for f, v in df.get(key, {}).items():
                upd[note(comps + [f])] = v
        for f in df.get("d", {}):
            rem.append(note(comps + [f]))
        for k, sd in df.items():
            if k.startswith("s") and isinstance(sd, dict):
                if sd.get("a") is True:
                    walk_arr(sd, comps + [k[1:]])
                else:
                    walk_doc(sd, comps + [k[1:]])

    def walk_arr(df, comps):
        if "l" in df:
            trunc.append({"field": note(comps), "newSize": int(df["l"])})
        for k, v in df.items():
            if k.startswith("u") and k[1:].isdigit():
                upd[note(comps + [int(k[1:])])] = v
            elif k.startswith("s") and k[1:].isdigit():
                if isinstance(v, dict) and v.get("a") is True:
                    walk_arr(v, comps + [int(k[1:])])
                else:
                    walk_doc(v, comps + [int(k[1:])])

    walk_doc(diff, [])
    return upd, rem, trunc, dis


def diff_to_v1(diff):
    """Approximate `$v: 1` modifier form of a diff for the 4.4 profile: {$set, $unset}."""
    sets, unsets = {}, {}

    def walk(df, prefix):
        for key in ("u", "i"):
            for f, v in df.get(key, {}).items():
                sets[prefix + f] = v
        for f in df.get("d", {}):
            unsets[prefix + f] = True
        for k, sd in df.items():
            if k.startswith("s") and isinstance(sd, dict):
                if sd.get("a") is True:
                    sets[prefix + k[1:]] = None  # placeholder filled by caller with the whole array
                else:
                    walk(sd, prefix + k[1:] + ".")

    walk(diff, "")
    return sets, unsets
