"""BSON value semantics for the MongoDB simulator.

Everything here is pure (no I/O, no locks): comparison and sort order of BSON values
(mongo-sim-spec.md §1.9: canonical type order, numbers compared by value across int32, int64,
double and decimal, type bracketing for $gt/$lt), query matching on dotted paths, projection,
update operators, the `$v: 2` oplog diff (spec §3.7) and resume tokens in KeyString V1 layout
(spec §3.11, server `key_string.cpp` / `resume_token.cpp`).

Documents are Python dicts decoded with DECODE_CODEC (tz-aware dates, binaries kept as Binary
with their subtype) so that field order, binary subtypes, int32/int64 (bson.int64.Int64) and doubles survive a round trip.
"""

import copy
import datetime
import re
import struct
import uuid
from decimal import Decimal

import bson
from bson.binary import Binary, STANDARD, UuidRepresentation
from bson.code import Code
from bson.codec_options import CodecOptions
from bson.dbref import DBRef
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.objectid import ObjectId
from bson.regex import Regex
from bson.son import SON
from bson.timestamp import Timestamp

CODEC = CodecOptions(document_class=dict, tz_aware=True, uuid_representation=STANDARD)
# Decoding keeps every binary a Binary with the subtype it was sent with: pymongo 3.x turns a
# 16-byte subtype 3 into a uuid.UUID under STANDARD, which would be stored back as subtype 4.
DECODE_CODEC = CodecOptions(document_class=dict, tz_aware=True,
                            uuid_representation=UuidRepresentation.UNSPECIFIED)


def encode(doc):
    """dict -> BSON bytes with the simulator's codec (its own uuid.UUID values as subtype 4;
    Binary values keep their subtype)."""
    return bson.encode(doc, codec_options=CODEC)


def decode(data):
    """BSON bytes -> dict; binaries stay Binary with their subtype (3 stays 3)."""
    return bson.decode(data, codec_options=DECODE_CODEC)


class SimError(Exception):
    """A command failure that becomes an `{ok: 0, code, codeName, errmsg}` reply (spec §1.5)."""

    def __init__(self, code, code_name, errmsg, labels=None, extra=None):
        Exception.__init__(self, errmsg)
        self.code = code
        self.code_name = code_name
        self.errmsg = errmsg
        self.labels = labels
        self.extra = extra or {}


def bad_value(msg):
    return SimError(2, "BadValue", msg)


class Undefined(object):
    """BSON undefined (type 0x06, deprecated): pymongo decodes it as None, which the simulator
    would store and serve as null. UNDEFINED is the one instance; documents keep it and it is
    encoded back as 0x06."""
    __slots__ = ()
    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = object.__new__(cls)
        return cls._instance

    def __repr__(self):
        return "Undefined"

    def __reduce__(self):
        return (Undefined, ())

    def __deepcopy__(self, memo):
        return self


UNDEFINED = Undefined()
# pymongo 3.11's pure-Python codec has no hook for type 0x06: register the decoder and encoder
# in its tables (keyed by the type byte and by the Python type).
bson._ELEMENT_GETTER[0x06] = lambda data, view, position, obj_end, opts, name: (UNDEFINED, position)
bson._ENCODERS[Undefined] = lambda name, value, check_keys, opts: b"\x06" + name


# ---------------------------------------------------------------------------
# canonical type order (BSON spec "Comparison/Sort Order")

def canon(v):
    """Canonical type rank used for sorting and for type bracketing."""
    if v is None:
        return 5
    if v is UNDEFINED:
        return 3  # the server ranks undefined with EOO, below null and above MinKey
    if isinstance(v, bool):
        return 40
    if isinstance(v, (int, float, Decimal128)):
        return 10
    if isinstance(v, Code):  # a str subclass: before str
        return 65 if v.scope is not None else 60  # code with scope sorts after code
    if isinstance(v, str):
        return 15
    if isinstance(v, (dict, SON)):
        return 20
    if isinstance(v, (list, tuple)):
        return 25
    if isinstance(v, (bytes, Binary, uuid.UUID)):
        return 30
    if isinstance(v, ObjectId):
        return 35
    if isinstance(v, datetime.datetime):
        return 45
    if isinstance(v, Timestamp):
        return 47
    if isinstance(v, (Regex, type(re.compile("")))):
        return 50
    if isinstance(v, DBRef):
        return 55
    if isinstance(v, MinKey):
        return 1
    if isinstance(v, MaxKey):
        return 127
    return 100


def _num(v):
    if isinstance(v, Decimal128):
        return v.to_decimal()
    return v


def _is_nan(x):
    return x != x


def cmp_num(a, b):
    a, b = _num(a), _num(b)
    an, bn = _is_nan(a), _is_nan(b)
    if an or bn:  # NaN sorts below every other number and equals itself
        return 0 if an and bn else (-1 if an else 1)
    if isinstance(a, Decimal) or isinstance(b, Decimal):
        a = a if isinstance(a, Decimal) else Decimal(a)
        b = b if isinstance(b, Decimal) else Decimal(b)
    return (a > b) - (a < b)


def _bin_parts(v):
    if isinstance(v, uuid.UUID):
        return 4, v.bytes
    if isinstance(v, Binary):
        return v.subtype, bytes(v)
    return 0, bytes(v)


def cmp_values(a, b):
    """Total order of two BSON values: -1, 0 or 1 (BSON comparison order)."""
    ca, cb = canon(a), canon(b)
    if ca != cb:
        return (ca > cb) - (ca < cb)
    if ca == 10:
        return cmp_num(a, b)
    if ca == 15:
        x, y = a.encode("utf-8"), b.encode("utf-8")
        return (x > y) - (x < y)
    if ca == 20:
        ia, ib = list(a.items()), list(b.items())
        for (ka, va), (kb, vb) in zip(ia, ib):
            c = (canon(va) > canon(vb)) - (canon(va) < canon(vb))
            if c:
                return c
            x, y = ka.encode(), kb.encode()
            if x != y:
                return (x > y) - (x < y)
            c = cmp_values(va, vb)
            if c:
                return c
        return (len(ia) > len(ib)) - (len(ia) < len(ib))
    if ca == 25:
        for va, vb in zip(a, b):
            c = cmp_values(va, vb)
            if c:
                return c
        return (len(a) > len(b)) - (len(a) < len(b))
    if ca == 30:
        sa, ba = _bin_parts(a)
        sb, bb = _bin_parts(b)
        ka, kb = (len(ba), sa, ba), (len(bb), sb, bb)
        return (ka > kb) - (ka < kb)
    if ca == 35:
        return (a.binary > b.binary) - (a.binary < b.binary)
    if ca == 40:
        return (a > b) - (a < b)
    if ca == 45:
        return (a > b) - (a < b)
    if ca == 47:
        ka, kb = (a.time, a.inc), (b.time, b.inc)
        return (ka > kb) - (ka < kb)
    if ca == 50:
        ka = (a.pattern, str(getattr(a, "flags", "")))
        kb = (b.pattern, str(getattr(b, "flags", "")))
        return (ka > kb) - (ka < kb)
    if ca in (60, 65):
        x, y = str(a).encode("utf-8"), str(b).encode("utf-8")
        if x != y:
            return (x > y) - (x < y)
        return cmp_values(a.scope, b.scope) if ca == 65 else 0
    if ca in (1, 5, 127):
        return 0
    x, y = repr(a), repr(b)
    return (x > y) - (x < y)


def values_equal(a, b):
    return cmp_values(a, b) == 0


def identical(a, b):
    """Byte-identical BSON values (type and value), used for the oplog diff."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a.keys()) == list(b.keys()) and all(identical(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(identical(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, Binary):
        return a.subtype == b.subtype and bytes(a) == bytes(b)
    return a == b


def id_key(v):
    """Hashable key with BSON equality (1 == 1.0 == NumberLong(1)) for `_id` lookup."""
    c = canon(v)
    if c == 10:
        n = _num(v)
        if isinstance(n, Decimal):
            if n == n.to_integral_value():
                return (10, int(n))
            return (10, str(n.normalize()))
        if isinstance(n, float):
            if n != n:
                return (10, "nan")
            if n.is_integer():
                return (10, int(n))
        return (10, n)
    if c == 20:
        return (20, tuple((k, id_key(x)) for k, x in v.items()))
    if c == 25:
        return (25, tuple(id_key(x) for x in v))
    if c == 30:
        return (30,) + _bin_parts(v)
    if c == 35:
        return (35, v.binary)
    if c == 47:
        return (47, v.time, v.inc)
    if c in (1, 5, 127):
        return (c,)
    if c == 50:
        return (50, v.pattern, str(getattr(v, "flags", "")))
    if c in (60, 65):
        return (c, str(v), id_key(v.scope) if v.scope is not None else None)
    return (c, v)


# ---------------------------------------------------------------------------
# dotted paths

def get_path_values(doc, path):
    """All values reached by a dotted path, descending into arrays like MongoDB does.

    Returns a list of (value, from_array) pairs; missing paths give []. An array found at the
    end of the path is returned itself and its elements (matching semantics)."""
    parts = path.split(".")
    out = []

    def walk(v, i):
        if i == len(parts):
            out.append(v)
            return
        p = parts[i]
        if isinstance(v, dict):
            if p in v:
                walk(v[p], i + 1)
        elif isinstance(v, list):
            if p.isdigit() and int(p) < len(v):
                walk(v[int(p)], i + 1)
            for e in v:
                if isinstance(e, dict):
                    walk(e, i)

    walk(doc, 0)
    return out


def get_field(doc, path, default=None):
    """Single value at a dotted path (no array fan-out except numeric indexes)."""
    v = doc
    for p in path.split("."):
        if isinstance(v, dict) and p in v:
            v = v[p]
        elif isinstance(v, list) and p.isdigit() and int(p) < len(v):
            v = v[int(p)]
        else:
            return default
    return v


_MISSING = object()


def has_path(doc, path):
    return get_field(doc, path, _MISSING) is not _MISSING


def set_path(doc, path, value, create=True):
    parts = path.split(".")
    v = doc
    for p in parts[:-1]:
        if isinstance(v, list):
            if not p.isdigit():
                raise SimError(28, "PathNotViable", "Cannot create field '%s' in element %r" % (p, v))
            i = int(p)
            while len(v) <= i:
                v.append(None)
            if not isinstance(v[i], (dict, list)):
                v[i] = {}
            v = v[i]
        else:
            if p not in v or v[p] is None and create:
                v[p] = {}
            elif not isinstance(v[p], (dict, list)):
                raise SimError(28, "PathNotViable",
                               "Cannot create field '%s' in element {%s: %r}" % (parts[-1], p, v[p]))
            v = v[p]
    last = parts[-1]
    if isinstance(v, list):
        i = int(last)
        while len(v) <= i:
            v.append(None)
        v[i] = value
    else:
        v[last] = value


def unset_path(doc, path):
    parts = path.split(".")
    v = doc
    for p in parts[:-1]:
        if isinstance(v, dict) and p in v:
            v = v[p]
        elif isinstance(v, list) and p.isdigit() and int(p) < len(v):
            v = v[int(p)]
        else:
            return False
    last = parts[-1]
    if isinstance(v, dict) and last in v:
        del v[last]
        return True
    if isinstance(v, list) and last.isdigit() and int(last) < len(v):
        v[int(last)] = None
        return True
    return False


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


def bson_type_num(v):
    if v is None:
        return 10
    if v is UNDEFINED:
        return 6
    if isinstance(v, bool):
        return 8
    if isinstance(v, Int64):
        return 18
    if isinstance(v, int):
        return 16 if -2 ** 31 <= v < 2 ** 31 else 18
    if isinstance(v, float):
        return 1
    if isinstance(v, Decimal128):
        return 19
    if isinstance(v, Code):  # a str subclass: before str
        return 15 if v.scope is not None else 13
    if isinstance(v, str):
        return 2
    if isinstance(v, dict):
        return 3
    if isinstance(v, list):
        return 4
    if isinstance(v, (bytes, Binary, uuid.UUID)):
        return 5
    if isinstance(v, ObjectId):
        return 7
    if isinstance(v, datetime.datetime):
        return 9
    if isinstance(v, Timestamp):
        return 17
    if isinstance(v, Regex):
        return 11
    if isinstance(v, MinKey):
        return -1
    if isinstance(v, MaxKey):
        return 127
    return 0


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


# ---------------------------------------------------------------------------
# KeyString V1 resume tokens (§3.11)

class _TypeBits(object):
    def __init__(self):
        self.bits = []

    def add(self, *bits):
        self.bits.extend(bits)

    def buffer(self):
        if not any(self.bits):
            return None
        nbytes = (len(self.bits) + 7) // 8
        out = bytearray(nbytes)
        for i, b in enumerate(self.bits):
            if b:
                out[i // 8] |= 1 << (i % 8)
        if nbytes == 1 and not (out[0] & 0x80):
            return bytes(out)
        return bytes([0x80 | nbytes]) + bytes(out)


def _ks_int(n):
    if n == 0:
        return b"\x29"
    neg = n < 0
    mag = (-n if neg else n) << 1
    k = (mag.bit_length() + 7) // 8
    if k > 8:
        raise ValueError("integer too large for KeyString")
    body = mag.to_bytes(k, "big")
    if neg:
        return bytes([0x27 - (k - 1)]) + bytes(255 - x for x in body)
    return bytes([0x2A + k]) + body


def _ks_large(x):
    # |x| >= 2**63 or infinite (KeyString kNumeric{Negative,Positive}LargeMagnitude): the
    # magnitude's IEEE-754 bits shifted left by one (V1's continuation bit), big-endian, inverted
    # for negatives. The server writes Int64 -2**63 this way too: it has no positive int64.
    bits = struct.unpack(">Q", struct.pack(">d", abs(float(x))))[0]
    body = ((bits << 1) & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "big")
    if x < 0:
        return b"\x1f" + bytes(255 - b for b in body)
    return b"\x33" + body


def _ks_fraction(x):
    # Non-integral doubles: integer part with the low "has fraction" bit, then 7 bytes of the
    # fraction. Order-preserving but not byte-identical to the server (SPEC-NOTES.md).
    neg = x < 0
    ax = -x if neg else x
    ip = int(ax)
    frac = int((ax - ip) * (1 << 56))
    if ip == 0:
        body = frac.to_bytes(7, "big")
        return (bytes([0x28]) + bytes(255 - b for b in body)) if neg else bytes([0x2A]) + body
    mag = (ip << 1) | 1
    k = (mag.bit_length() + 7) // 8
    body = mag.to_bytes(k, "big") + frac.to_bytes(7, "big")
    if neg:
        return bytes([0x27 - (k - 1)]) + bytes(255 - b for b in body)
    return bytes([0x2A + k]) + body


def _ks_str(s):
    return s.encode("utf-8").replace(b"\x00", b"\x00\xff") + b"\x00"


def _generic_type_byte(v):
    c = canon(v)
    return {1: 0x0A, 3: 0x0F, 5: 0x14, 10: 0x1E, 15: 0x3C, 20: 0x46, 25: 0x50, 30: 0x5A, 35: 0x64,
            40: 0x6E, 45: 0x78, 47: 0x82, 50: 0x8C, 127: 0xF0}.get(c, 0x3C)


def ks_value(v, tb):
    """KeyString V1 encoding of one BSON value (type byte + body)."""
    if v is None:
        return b"\x14"
    if v is UNDEFINED:
        return b"\x0f"  # KeyString CType kUndefined
    if isinstance(v, MinKey):
        return b"\x0a"
    if isinstance(v, MaxKey):
        return b"\xf0"
    if isinstance(v, bool):
        return b"\x6f" if v else b"\x6e"
    if isinstance(v, Int64):
        tb.add(0, 1)
        if int(v) == -(2 ** 63):
            return _ks_large(-(2.0 ** 63))
        return _ks_int(int(v))
    if isinstance(v, int):
        tb.add(0, 0)
        return _ks_int(v)
    if isinstance(v, float):
        tb.add(1, 0)
        if v != v:
            return b"\x1e"
        if v.is_integer() and abs(v) < 2 ** 63:
            return _ks_int(int(v))
        if abs(v) >= 2 ** 63:
            return _ks_large(v)
        return _ks_fraction(v)
    if isinstance(v, Decimal128):
        tb.add(1, 1)
        d = v.to_decimal()
        if d.is_nan():
            return b"\x1e"
        if d.is_infinite() or abs(d) >= 2 ** 63:
            return _ks_large(float(d))
        if d == d.to_integral_value():
            return _ks_int(int(d))
        return _ks_fraction(float(d))
    if isinstance(v, str):
        tb.add(0)
        return b"\x3c" + _ks_str(v)
    if isinstance(v, dict):
        out = bytearray(b"\x46")
        for k, x in v.items():
            out.append(_generic_type_byte(x))
            out += _ks_str(k)
            out += ks_value(x, tb)
        out.append(0)
        return bytes(out)
    if isinstance(v, list):
        out = bytearray(b"\x50")
        for x in v:
            out += ks_value(x, tb)
        out.append(0)
        return bytes(out)
    if isinstance(v, (bytes, Binary, uuid.UUID)):
        st, data = _bin_parts(v)
        n = len(data)
        ln = bytes([n]) if n < 0xFF else b"\xff" + struct.pack(">I", n)
        return b"\x5a" + ln + bytes([st]) + data
    if isinstance(v, ObjectId):
        return b"\x64" + v.binary
    if isinstance(v, datetime.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=datetime.timezone.utc)
        ms = int((v - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)).total_seconds() * 1000)
        return b"\x78" + struct.pack(">Q", (ms & 0xFFFFFFFFFFFFFFFF) ^ (1 << 63))
    if isinstance(v, Timestamp):
        return b"\x82" + struct.pack(">Q", (v.time << 32) | v.inc)
    if isinstance(v, Regex):
        return b"\x8c" + _ks_str(v.pattern) + _ks_str(str(v.flags))
    return b"\x3c" + _ks_str(str(v))


def make_token(ts, version=1, token_type=128, txn_op_index=0, from_invalidate=False,
               uuid_=None, event_id=None):
    """Build a resume token document `{_data: <hex>[, _typeBits]}` (§3.11).

    ts: bson Timestamp; version 1 or 2; token_type 0 (high-water mark) or 128 (event);
    uuid_: collection UUID or None; event_id: documentKey (v1) or {operationType, documentKey}
    (v2) or None."""
    tb = _TypeBits()
    out = bytearray()
    out += ks_value(ts, tb)
    # version, tokenType and txnOpIndex are int32 values: two (zero) type bits each, which
    # shift the bits of the eventIdentifier's numbers (key_string.h TypeBits)
    for n in (version, token_type, txn_op_index):
        tb.add(0, 0)
        out += _ks_int(n)
    out += b"\x6f" if from_invalidate else b"\x6e"
    if uuid_ is not None:
        out += ks_value(uuid_, tb)
    elif version >= 2:
        out += b"\x14"
    if event_id is not None:
        out += ks_value(event_id, tb)
    out += b"\x04"
    tok = {"_data": bytes(out).hex().upper()}
    buf = tb.buffer()
    if buf is not None:
        tok["_typeBits"] = Binary(buf, 0)
    return tok


def _read_ks_int(b, i):
    t = b[i]
    if t == 0x29:
        return 0, i + 1
    if 0x2B <= t <= 0x32:
        k = t - 0x2A
        return int.from_bytes(b[i + 1:i + 1 + k], "big") >> 1, i + 1 + k
    raise ValueError("not a KeyString integer at %d" % i)


def parse_token(tok):
    """Decode the fixed prefix of a resume token: dict(ts, version, token_type, txn_op_index,
    from_invalidate, data). Raises SimError 9/40647 when malformed (§3.12)."""
    if not isinstance(tok, dict) or "_data" not in tok:
        raise SimError(40647, "Location40647", "Bad resume token: _data of missing or of wrong type. Expected string, got %r" % (tok,))
    data = tok["_data"]
    if not isinstance(data, str):
        raise SimError(40647, "Location40647", "Bad resume token: _data of missing or of wrong type. Expected string")
    try:
        b = bytes.fromhex(data)
        if b[0] != 0x82:
            raise ValueError("no timestamp")
        t = struct.unpack(">Q", b[1:9])[0]
        ts = Timestamp(t >> 32, t & 0xFFFFFFFF)
        i = 9
        version, i = _read_ks_int(b, i)
        token_type, i = _read_ks_int(b, i)
        txn, i = _read_ks_int(b, i)
        inv = b[i] == 0x6F
    except (ValueError, IndexError):
        raise SimError(9, "FailedToParse", "failed to decode resume token %r" % data)
    return {"ts": ts, "version": version, "token_type": token_type, "txn_op_index": txn,
            "from_invalidate": inv, "data": data.upper()}


def ts_key(ts):
    return (ts.time << 32) | ts.inc


def key_ts(k):
    return Timestamp(k >> 32, k & 0xFFFFFFFF)
