"""Query matching, `_id` range lookups, sort and projection for the MongoDB simulator.

Pure functions over documents decoded with simvalue's codec: the query language subset the
simulator answers (mongo-sim-spec.md §1.9: comparison with type bracketing, $in/$nin, $exists,
$regex, $not, $size, $all, $elemMatch, $type, $mod, $and/$or/$nor and a small $expr), the `_id`
bounds that answer the snapshot's chunked reads without a scan, sort orders (arrays by their
min/max element, as the server) and find projections.
"""

import copy
import re

from bson.regex import Regex

from simvalue import (SimError, _MISSING, _is_nan, _num, bad_value, bson_type_num, canon,
                      cmp_values, encode, get_field, get_path_values, set_path, unset_path,
                      values_equal)

# ---------------------------------------------------------------------------
# regex pattern limit

# The server refuses a regular expression longer than 16384 bytes (2^14, the PCRE2
# max_pattern_length MongoDB sets; jstests/core/regex_limit.js and
# jstests/aggregation/expressions/regex_limits.js probe it): in a query ($regex, /re/)
# with 51091 "Regular expression is invalid", in $regexMatch/$regexFind/$regexFindAll
# with 51111 "Invalid Regex in $regexMatch". Checked when the command is parsed.
MAX_REGEX_PATTERN_LEN = 16384
_REGEX_EXPRS = ("$regexMatch", "$regexFind", "$regexFindAll")
_TOO_LONG = "pattern string is longer than the limit set by the application"


def _pattern_of(r):
    if isinstance(r, Regex):
        return r.pattern
    if isinstance(r, type(re.compile(""))):
        return r.pattern
    return r if isinstance(r, str) else None


def check_regex_limits(value):
    """Raises the server's error for the first regular expression in value (a query, an
    expression or a pipeline) longer than MAX_REGEX_PATTERN_LEN bytes."""
    if isinstance(value, (Regex, type(re.compile("")))):
        pat = _pattern_of(value)
        if len(pat.encode() if isinstance(pat, str) else pat) > MAX_REGEX_PATTERN_LEN:
            raise SimError(51091, "Location51091", "Regular expression is invalid: " + _TOO_LONG)
        return
    if isinstance(value, list):
        for v in value:
            check_regex_limits(v)
        return
    if not isinstance(value, dict):
        return
    for k, v in value.items():
        if k in _REGEX_EXPRS and isinstance(v, dict):
            pat = _pattern_of(v.get("regex"))
            if pat is not None and len(pat.encode() if isinstance(pat, str) else pat) > \
                    MAX_REGEX_PATTERN_LEN:
                raise SimError(51111, "Location51111", "Invalid Regex in %s: %s" % (k, _TOO_LONG))
            check_regex_limits({kk: vv for kk, vv in v.items() if kk != "regex"})
            continue
        if k == "$regex" and isinstance(v, str):
            if len(v.encode()) > MAX_REGEX_PATTERN_LEN:
                raise SimError(51091, "Location51091", "Regular expression is invalid: " + _TOO_LONG)
            continue
        check_regex_limits(v)


# ---------------------------------------------------------------------------
# query matching

def _regex_of(r, options=""):
    if isinstance(r, Regex):
        flags = 0
        fl = r.flags if isinstance(r.flags, str) else ""
        if isinstance(r.flags, int):
            flags = r.flags
        else:
            for ch in fl + options:
                flags |= {"i": re.I, "m": re.M, "s": re.S, "x": re.X}.get(ch, 0)
        return re.compile(r.pattern, flags)
    if isinstance(r, type(re.compile(""))):
        return r
    flags = 0
    for ch in options or "":
        flags |= {"i": re.I, "m": re.M, "s": re.S, "x": re.X}.get(ch, 0)
    return re.compile(r, flags)


_TYPE_ALIASES = {
    "double": 1, "string": 2, "object": 3, "array": 4, "binData": 5, "objectId": 7, "bool": 8,
    "date": 9, "null": 10, "regex": 11, "int": 16, "timestamp": 17, "long": 18, "decimal": 19,
    "minKey": -1, "maxKey": 127, "undefined": 6, "dbPointer": 12, "javascript": 13, "symbol": 14,
    "javascriptWithScope": 15,
}


def _cmp_op(op, v, operand):
    # type bracketing: $gt/$gte/$lt/$lte only compare within one canonical type class
    # (spec §1.9); MinKey/MaxKey operands compare with everything.
    co = canon(operand)
    if co not in (1, 127) and canon(v) != co:
        return False
    if co == 10 and (_is_nan(_num(v)) or _is_nan(_num(operand))):
        # MongoDB's matcher (ComparisonMatchExpressionBase::compare): NaN equals NaN and is
        # neither less nor greater than any number, although it sorts below them all, so
        # {$lte: 5} and {$gt: NaN} never match a NaN
        both = _is_nan(_num(v)) and _is_nan(_num(operand))
        return both and op in ("$gte", "$lte")
    c = cmp_values(v, operand)
    if op == "$gt":
        return c > 0
    if op == "$gte":
        return c >= 0
    if op == "$lt":
        return c < 0
    return c <= 0


def _eq_match(vals, operand):
    if operand is None:
        if not vals:
            return True
    for v in vals:
        if isinstance(operand, Regex) or isinstance(operand, type(re.compile(""))):
            if isinstance(v, str) and _regex_of(operand).search(v):
                return True
            if isinstance(v, list) and any(isinstance(e, str) and _regex_of(operand).search(e) for e in v):
                return True
            continue
        if values_equal(v, operand):
            return True
        if isinstance(v, list) and not isinstance(operand, list):
            if any(values_equal(e, operand) for e in v):
                return True
        if isinstance(v, list) and operand is None and any(e is None for e in v):
            return True
    return False


def _expand(vals):
    """Values plus the elements of array values (for comparison operators)."""
    out = []
    for v in vals:
        out.append(v)
        if isinstance(v, list):
            out.extend(v)
    return out


def match_field(doc, path, cond):
    vals = get_path_values(doc, path)
    if isinstance(cond, dict) and cond and all(k.startswith("$") for k in cond):
        opts = cond.get("$options", "")
        for op, operand in cond.items():
            if op == "$options":
                continue
            if not _match_op(vals, op, operand, opts, doc, path):
                return False
        return True
    return _eq_match(vals, cond)


def _match_op(vals, op, operand, opts, doc, path):
    if op == "$eq":
        return _eq_match(vals, operand)
    if op == "$ne":
        return not _eq_match(vals, operand)
    if op in ("$gt", "$gte", "$lt", "$lte"):
        return any(_cmp_op(op, v, operand) for v in _expand(vals))
    if op == "$in":
        if not isinstance(operand, list):
            raise bad_value("$in needs an array")
        return any(_eq_match(vals, o) for o in operand)
    if op == "$nin":
        return not any(_eq_match(vals, o) for o in operand)
    if op == "$exists":
        return bool(vals) == bool(operand)
    if op == "$regex":
        rx = _regex_of(operand, opts)
        return any(isinstance(v, str) and rx.search(v) for v in _expand(vals))
    if op == "$not":
        if isinstance(operand, dict):
            return not match_field(doc, path, operand)
        return not _match_op(vals, "$regex", operand, "", doc, path)
    if op == "$size":
        return any(isinstance(v, list) and len(v) == operand for v in vals)
    if op == "$all":
        return all(_eq_match(vals, o) for o in operand)
    if op == "$elemMatch":
        for v in vals:
            if isinstance(v, list):
                for e in v:
                    if isinstance(e, dict) and not all(k.startswith("$") for k in operand):
                        if matches(e, operand):
                            return True
                    elif _match_elem_ops(e, operand):
                        return True
        return False
    if op == "$type":
        wanted = operand if isinstance(operand, list) else [operand]
        nums = set()
        for w in wanted:
            if w == "number":
                nums.update((1, 16, 18, 19))
            else:
                nums.add(_TYPE_ALIASES.get(w, w))
        return any(bson_type_num(v) in nums for v in _expand(vals))
    if op == "$mod":
        d, r = operand
        return any(canon(v) == 10 and int(_num(v)) % int(d) == int(r) for v in _expand(vals))
    raise SimError(2, "BadValue", "unknown operator: %s" % op)


def _match_elem_ops(e, ops):
    return all(_match_op([e], op, operand, ops.get("$options", ""), {"x": e}, "x")
               for op, operand in ops.items() if op != "$options")


def eval_expr(doc, e):
    """A small subset of aggregation expressions for $expr (what connectors put in a
    change-stream $match): field paths, $literal, $concat, $regexMatch, $and, $or, $not,
    $eq, $ne, $in, $gt, $gte, $lt, $lte, $ifNull. Anything else is BadValue, as an unknown operator would be."""
    if isinstance(e, str):
        if e.startswith("$$"):
            raise SimError(2, "BadValue", "variables are not supported by the simulator")
        if e.startswith("$"):
            vals = get_path_values(doc, e[1:])
            return vals[0] if vals else None
        return e
    if isinstance(e, list):
        return [eval_expr(doc, x) for x in e]
    if not isinstance(e, dict) or not e or not next(iter(e)).startswith("$"):
        return e
    op, arg = next(iter(e.items()))
    args = arg if isinstance(arg, list) else [arg]
    if op == "$literal":
        return arg
    if op == "$concat":
        parts = [eval_expr(doc, a) for a in args]
        if any(p is None for p in parts):
            return None
        return "".join(parts)
    if op == "$regexMatch":
        inp = eval_expr(doc, arg.get("input"))
        rx = _regex_of(eval_expr(doc, arg.get("regex")), eval_expr(doc, arg.get("options")) or "")
        return isinstance(inp, str) and rx.search(inp) is not None
    if op == "$and":
        return all(_expr_true(eval_expr(doc, a)) for a in args)
    if op == "$or":
        return any(_expr_true(eval_expr(doc, a)) for a in args)
    if op == "$not":
        return not _expr_true(eval_expr(doc, args[0]))
    if op in ("$eq", "$ne"):
        a, b = (eval_expr(doc, x) for x in args)
        return values_equal(a, b) == (op == "$eq")
    if op == "$in":
        a, b = (eval_expr(doc, x) for x in args)
        return any(values_equal(a, x) for x in (b or []))
    if op in ("$gt", "$gte", "$lt", "$lte"):
        # aggregation comparison: BSON order across types, no type bracketing
        a, b = (eval_expr(doc, x) for x in args)
        c = cmp_values(a, b)
        return {"$gt": c > 0, "$gte": c >= 0, "$lt": c < 0, "$lte": c <= 0}[op]
    if op == "$bsonSize":
        v = eval_expr(doc, args[0])
        if v is None:
            return None
        if not isinstance(v, dict):
            raise SimError(31393, "Location31393", "$bsonSize requires a document input")
        return len(encode(v))
    if op == "$ifNull":
        for x in args[:-1]:
            v = eval_expr(doc, x)
            if v is not None:
                return v
        return eval_expr(doc, args[-1])
    raise SimError(168, "InvalidPipelineOperator", "Unrecognized expression '%s'" % op)


def _expr_true(v):
    return v is not None and v is not False and not (isinstance(v, (int, float)) and v == 0)


def matches(doc, query):
    """True if doc matches a MongoDB query document (subset of the query language, §1.9)."""
    for k, cond in query.items():
        if k == "$and":
            if not all(matches(doc, q) for q in cond):
                return False
        elif k == "$or":
            if not any(matches(doc, q) for q in cond):
                return False
        elif k == "$nor":
            if any(matches(doc, q) for q in cond):
                return False
        elif k == "$expr":
            if not _expr_true(eval_expr(doc, cond)):
                return False
        elif k == "$comment":
            continue
        elif k.startswith("$"):
            raise SimError(2, "BadValue", "unknown top level operator: %s" % k)
        else:
            if not match_field(doc, k, cond):
                return False
    return True


# ---------------------------------------------------------------------------
# `_id` index bounds for the chunked snapshot reads
#
# A real server answers {_id: {$type: T, $gt: a, $lte: b}} (and an $or of such clauses, as
# snapshot/keyrange writes) from the _id index, reading only the keys in the bounds. The
# simulator has no index: it sorts each type bracket's keys per query and bisects, so that a
# range costs about its size rather than a scan of the collection with every clause. It only
# narrows the candidates; matches() still decides, so results are unchanged.

_TYPE_RANKS = {
    "minKey": 1, "undefined": 3, "null": 5, "number": 10, "double": 10, "int": 10, "long": 10,
    "decimal": 10, "string": 15, "symbol": 15, "object": 20, "array": 25, "binData": 30,
    "objectId": 35, "bool": 40, "date": 45, "timestamp": 47, "regex": 50, "dbPointer": 55,
    "javascript": 60, "javascriptWithScope": 65, "maxKey": 127,
}
_CMP_OPS = ("$gt", "$gte", "$lt", "$lte", "$eq")


def _index_key(v, rank):
    """A natively comparable key that orders values of one bracket as cmp_values does, or
    None when there is none (the value is then always a candidate)."""
    if rank == 10:
        n = _num(v)
        return None if _is_nan(n) else n
    if rank == 15:
        return v.encode("utf-8")
    if rank == 35:
        return v.binary
    if rank == 40:
        return bool(v)
    if rank == 45 and v.tzinfo is None:
        return v
    if rank == 47:
        return (v.time, v.inc)
    return None


def _type_covers(names, rank):
    """True when the $type names match every value of the bracket that has an index key."""
    names = names if isinstance(names, list) else [names]
    whole = {10: "number", 15: "string", 35: "objectId", 40: "bool", 45: "date", 47: "timestamp"}
    return whole.get(rank) in names


def _id_clause_ranks(c):
    """The brackets of an {_id: {$type: ..., comparisons}} clause, or None for other shapes."""
    if not isinstance(c, dict) or list(c.keys()) != ["_id"] or not isinstance(c["_id"], dict):
        return None
    ops = c["_id"]
    if "$type" not in ops or any(k != "$type" and k not in _CMP_OPS for k in ops):
        return None
    names = ops["$type"] if isinstance(ops["$type"], list) else [ops["$type"]]
    if not all(isinstance(n, str) and n in _TYPE_RANKS for n in names):
        return None
    return {_TYPE_RANKS[n] for n in names}


def id_index_plan(filt):
    """(clauses, extra) for filters of the chunked reads' shapes: one _id clause or an $or of
    them, alone or as {$and: [that, extra]}; None for any other filter."""
    if not isinstance(filt, dict):
        return None
    span, extra = filt, None
    if list(filt.keys()) == ["$and"] and isinstance(filt["$and"], list) and len(filt["$and"]) == 2:
        span, extra = filt["$and"]
    if isinstance(span, dict) and list(span.keys()) == ["$or"] and isinstance(span["$or"], list):
        clauses = span["$or"]
    else:
        clauses = [span]
    if not clauses or any(_id_clause_ranks(c) is None for c in clauses):
        return None
    return clauses, extra


def id_index_find(docs, plan):
    """The documents of docs matching the plan's filter (id_index_plan), each once."""
    import bisect
    clauses, extra = plan
    buckets = {}  # rank -> [sorted [(key, seq)], docs by seq, unsorted docs]
    for seq, d in enumerate(docs):
        v = d.get("_id")
        r = canon(v)
        b = buckets.setdefault(r, ([], [], []))
        try:
            k = _index_key(v, r)
        except (AttributeError, TypeError):
            k = None
        if k is None:
            b[2].append(d)
        else:
            b[0].append((k, len(b[1])))
            b[1].append(d)
    for b in buckets.values():
        try:
            b[0].sort(key=lambda e: e[0])
        except TypeError:  # keys not comparable after all: every one is a candidate
            b[2].extend(b[1])
            del b[0][:], b[1][:]
    out, seen = [], set()
    for c in clauses:
        ops = c["_id"]
        for r in sorted(_id_clause_ranks(c)):
            if r not in buckets:
                continue
            keyed, bydoc, rest = buckets[r]
            lo, hi = 0, len(keyed)
            # exact: the bounds below are the clause's whole condition on the keyed values
            exact = _type_covers(ops["$type"], r)
            for op in _CMP_OPS:
                if op not in ops:
                    continue
                try:
                    k = _index_key(ops[op], r) if canon(ops[op]) == r else None
                except (AttributeError, TypeError):
                    k = None
                if k is None:
                    exact = False
                    continue
                before, after = (k, -1), (k, len(bydoc))  # around every equal key
                if op == "$gt":
                    lo = max(lo, bisect.bisect_right(keyed, after))
                elif op in ("$gte", "$eq"):
                    lo = max(lo, bisect.bisect_left(keyed, before))
                if op == "$lt":
                    hi = min(hi, bisect.bisect_left(keyed, before))
                elif op in ("$lte", "$eq"):
                    hi = min(hi, bisect.bisect_right(keyed, after))
            for d, checked in [(bydoc[seq], exact) for _, seq in keyed[lo:hi]] + [(d, False) for d in rest]:
                if id(d) in seen or (not checked and not matches(d, c)):
                    continue
                if extra is not None and not matches(d, extra):
                    continue
                seen.add(id(d))
                out.append(d)
    return out


# ---------------------------------------------------------------------------
# sort and projection

def _sort_key_value(doc, path, direction):
    vals = get_path_values(doc, path)
    flat = []
    for v in vals:
        if isinstance(v, list):
            flat.extend(v if v else [None])
        else:
            flat.append(v)
    if not flat:
        return None
    best = flat[0]
    for v in flat[1:]:
        c = cmp_values(v, best)
        if (direction > 0 and c < 0) or (direction < 0 and c > 0):
            best = v
    return best


def sort_docs(docs, spec):
    """Sort a list of documents by a sort spec (arrays use min/max element like the server)."""
    import functools
    items = list(spec.items())
    if not items:
        return list(docs)

    def cmp(a, b):
        for path, d in items:
            if isinstance(d, dict):
                continue
            d = 1 if d >= 0 else -1
            c = cmp_values(_sort_key_value(a, path, d), _sort_key_value(b, path, d))
            if c:
                return c * d
        return 0

    return sorted(docs, key=functools.cmp_to_key(cmp))


def project(doc, proj):
    """Apply a find projection (inclusion or exclusion; `_id` included unless excluded)."""
    if not proj:
        return doc
    incl = {k: v for k, v in proj.items() if k != "_id"}
    id_flag = proj.get("_id", 1)
    include_mode = any(_truthy(v) for v in incl.values()) or (not incl and _truthy(id_flag))
    if include_mode:
        out = {}
        if _truthy(id_flag) and "_id" in doc:
            out["_id"] = doc["_id"]
        for path, v in incl.items():
            if isinstance(v, str) and v.startswith("$"):
                val = get_field(doc, v[1:], _MISSING)
                if val is not _MISSING:
                    set_path(out, path, copy.deepcopy(val))
                continue
            if isinstance(v, dict) and "$literal" in v:
                set_path(out, path, v["$literal"])
                continue
            if not _truthy(v):
                continue
            _copy_path(doc, out, path.split("."))
        return out
    out = copy.deepcopy(doc)
    for path, v in proj.items():
        if not _truthy(v):
            unset_path(out, path)
    return out


def _truthy(v):
    return bool(v) if not isinstance(v, (dict, str)) else True


def _copy_path(src, dst, parts):
    if not isinstance(src, dict) or parts[0] not in src:
        return
    v = src[parts[0]]
    if len(parts) == 1:
        dst[parts[0]] = copy.deepcopy(v)
        return
    if isinstance(v, dict):
        sub = dst.setdefault(parts[0], {})
        _copy_path(v, sub, parts[1:])
    elif isinstance(v, list):
        arr = dst.setdefault(parts[0], [])
        for e in v:
            if isinstance(e, dict):
                sub = {}
                _copy_path(e, sub, parts[1:])
                arr.append(sub)
