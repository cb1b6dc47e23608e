"""BSON values for the MongoDB simulator: the codec, errors, type order and dotted paths.

Everything here is pure (no I/O, no locks): the BSON codec the simulator stores and serves
documents with, SimError (a command failure), BSON undefined, the canonical type order and
comparison of BSON values (mongo-sim-spec.md §1.9: canonical type order, numbers compared by
value across int32, int64, double and decimal), equality and `_id` keys, BSON type numbers, and
reading and writing fields on dotted paths. Query matching is in simquery, update operators and
the oplog diff in simupdate, resume tokens in simtoken.

Documents are Python dicts decoded with DECODE_CODEC (tz-aware dates, binaries kept as Binary
with their subtype) so that field order, binary subtypes, int32/int64 (bson.int64.Int64) and doubles survive a round trip.
"""

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
# BSON type numbers (the `$type` operator's and the `$type` expression's)

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
