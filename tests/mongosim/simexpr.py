"""Aggregation expressions for pipeline-style updates and change-stream stages
(mongo-sim-spec.md §1.9, §3): what application code commonly writes in an update pipeline.

Covered: field paths and $$ROOT / $$CURRENT / $$NOW / $$REMOVE / $$this / $$value and `let`-style
variables of $map / $filter / $reduce / $let; $literal; arithmetic ($add, $subtract, $multiply,
$divide, $mod, $abs, $ceil, $floor, $round, $trunc, $pow, $sqrt); string ($concat, $toUpper,
$toLower, $substr, $substrCP, $substrBytes, $strLenCP, $strLenBytes, $trim, $ltrim, $rtrim,
$split, $indexOfCP); conditional ($cond, $ifNull, $switch); comparison ($eq, $ne, $gt, $gte,
$lt, $lte, $cmp) and boolean ($and, $or, $not); array ($size, $arrayElemAt, $first, $last,
$concatArrays, $slice, $in, $isArray, $reverseArray, $map, $filter, $reduce, $range);
conversion ($toString, $toInt, $toLong, $toDouble, $toDecimal, $toBool, $type); $mergeObjects.
Anything else is 168 InvalidPipelineOperator, as on a server. Numeric results follow the
server's widening: int32 overflows to int64, any int64 gives int64, any double a double, any
decimal a decimal; date ± number is a date and date − date a number of milliseconds.
"""

import datetime
import math
from decimal import Decimal, ROUND_HALF_EVEN

from bson.decimal128 import Decimal128
from bson.int64 import Int64

import simvalue
from simvalue import SimError

REMOVE = object()  # $$REMOVE: the field is left out
_I32 = (-(2 ** 31), 2 ** 31 - 1)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def _kind(v):
    if isinstance(v, bool):
        return None
    if isinstance(v, Decimal128):
        return 3
    if isinstance(v, float):
        return 2
    if isinstance(v, Int64):
        return 1
    if isinstance(v, int):
        return 0
    return None


def _num(v):
    return v.to_decimal() if isinstance(v, Decimal128) else v


def _make(result, kind):
    if kind == 3:
        return Decimal128(Decimal(result))
    if kind == 2:
        return float(result)
    result = int(result)
    if kind == 0 and _I32[0] <= result <= _I32[1]:
        return result
    if -(2 ** 63) <= result < 2 ** 63:
        return Int64(result)
    return float(result)  # the server turns an int64 overflow into a double


def _arith(op, vals):
    if any(v is None for v in vals):
        return None
    dates = [v for v in vals if isinstance(v, datetime.datetime)]
    kinds = [_kind(v) for v in vals if not isinstance(v, datetime.datetime)]
    if any(k is None for k in kinds):
        raise SimError(14, "TypeMismatch", "%s only supports numeric or date types" % op)
    kind = max(kinds) if kinds else 0
    nums = [_num(v) for v in vals if not isinstance(v, datetime.datetime)]
    if kind == 3:
        nums = [Decimal(x) if not isinstance(x, Decimal) else x for x in nums]
    if op == "$add":
        if len(dates) > 1:
            raise SimError(16612, "Location16612", "only one date allowed in an $add expression")
        total = sum(nums) if nums else 0
        if dates:
            return dates[0] + datetime.timedelta(milliseconds=float(total))
        return _make(total, kind)
    if op == "$multiply":
        r = 1
        for x in nums:
            r = r * x
        return _make(r, kind)
    a, b = vals
    if op == "$subtract":
        if isinstance(a, datetime.datetime) and isinstance(b, datetime.datetime):
            return Int64(int((a - b) / datetime.timedelta(milliseconds=1)))
        if isinstance(a, datetime.datetime):
            return a - datetime.timedelta(milliseconds=float(_num(b)))
        if isinstance(b, datetime.datetime):
            raise SimError(16556, "Location16556", "cant $subtract a date from a number")
        return _make(_num(a) - _num(b), kind)
    if dates:
        raise SimError(14, "TypeMismatch", "%s only supports numeric types" % op)
    x, y = nums
    if op == "$divide":
        if y == 0:
            raise SimError(2, "BadValue", "can't $divide by zero")
        return Decimal128(Decimal(x) / Decimal(y)) if kind == 3 else float(x) / float(y)
    if op == "$mod":
        if y == 0:
            raise SimError(16610, "Location16610", "can't $mod by zero")
        r = math.fmod(x, y) if kind == 2 else (abs(x) % abs(y)) * (1 if x >= 0 else -1)
        return _make(r, kind)
    if op == "$pow":
        return _make(x ** y, kind) if kind < 2 and y >= 0 else _make(float(x) ** float(y), max(kind, 2))
    raise SimError(168, "InvalidPipelineOperator", "Unrecognized expression '%s'" % op)


def _round(x, places, trunc):
    kind = _kind(x)
    if x is None:
        return None
    d = Decimal(str(_num(x))) if kind == 2 else Decimal(_num(x))
    q = Decimal(1).scaleb(-places)
    r = d.quantize(q, rounding="ROUND_DOWN" if trunc else ROUND_HALF_EVEN)
    return _make(r, kind) if kind >= 2 or places <= 0 else _make(r, kind)


def _str(v):
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    if isinstance(v, datetime.datetime):
        return v.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + \
            "%03dZ" % (v.microsecond // 1000)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(_num(v))


def _type_name(v):
    n = simvalue.bson_type_num(v)
    return {1: "double", 2: "string", 3: "object", 4: "array", 5: "binData", 6: "undefined",
            7: "objectId", 8: "bool", 9: "date", 10: "null", 11: "regex", 13: "javascript",
            16: "int", 17: "timestamp", 18: "long", 19: "decimal", -1: "minKey",
            127: "maxKey"}.get(n, "missing" if v is REMOVE else "unknown")


def evaluate(expr, doc, vars_=None):
    """Value of aggregation expression expr against doc (the current document)."""
    vars_ = vars_ or {}
    if isinstance(expr, str):
        if expr.startswith("$$"):
            name, _, rest = expr[2:].partition(".")
            if name in ("ROOT", "CURRENT"):
                base = doc
            elif name == "NOW":
                base = datetime.datetime.now(datetime.timezone.utc)
            elif name == "REMOVE":
                return REMOVE
            elif name in vars_:
                base = vars_[name]
            else:
                raise SimError(17276, "Location17276", "Use of undefined variable: %s" % name)
            return simvalue.get_field(base, rest) if rest else base
        if expr.startswith("$"):
            return simvalue.get_field(doc, expr[1:])
        return expr
    if isinstance(expr, list):
        return [evaluate(x, doc, vars_) for x in expr]
    if not isinstance(expr, dict):
        return expr
    if len(expr) == 1 and next(iter(expr)).startswith("$"):
        op, arg = next(iter(expr.items()))
        return _operator(op, arg, doc, vars_)
    out = {}
    for k, v in expr.items():
        r = evaluate(v, doc, vars_)
        if r is not REMOVE:
            out[k] = r
    return out


def _args(arg, doc, vars_):
    return [evaluate(a, doc, vars_) for a in (arg if isinstance(arg, list) else [arg])]


def _operator(op, arg, doc, vars_):
    ev = lambda e: evaluate(e, doc, vars_)  # noqa: E731
    if op == "$literal":
        return arg
    if op in ("$add", "$subtract", "$multiply", "$divide", "$mod", "$pow"):
        return _arith(op, _args(arg, doc, vars_))
    if op in ("$abs", "$ceil", "$floor", "$sqrt"):
        x = _args(arg, doc, vars_)[0]
        if x is None:
            return None
        k = _kind(x)
        if k is None:
            raise SimError(28765, "Location28765", "%s only supports numeric types" % op)
        n = _num(x)
        if op == "$abs":
            return _make(abs(n), k)
        if op == "$sqrt":
            return Decimal128(Decimal(n).sqrt()) if k == 3 else math.sqrt(n)
        r = math.ceil(n) if op == "$ceil" else math.floor(n)
        return _make(r, k)
    if op in ("$round", "$trunc"):
        a = _args(arg, doc, vars_)
        return _round(a[0], int(a[1]) if len(a) > 1 else 0, op == "$trunc")
    if op == "$concat":
        parts = _args(arg, doc, vars_)
        if any(p is None for p in parts):
            return None
        if not all(isinstance(p, str) for p in parts):
            raise SimError(16702, "Location16702", "$concat only supports strings")
        return "".join(parts)
    if op in ("$toUpper", "$toLower"):
        s = _str(_args(arg, doc, vars_)[0])
        return s.upper() if op == "$toUpper" else s.lower()
    if op in ("$substr", "$substrBytes"):
        s, start, n = _args(arg, doc, vars_)
        b = _str(s).encode("utf-8")
        start, n = int(start), int(n)
        return b[start:] .decode("utf-8", "ignore") if n < 0 else b[start:start + n].decode("utf-8", "ignore")
    if op == "$substrCP":
        s, start, n = _args(arg, doc, vars_)
        return _str(s)[int(start):int(start) + int(n)]
    if op == "$strLenCP":
        return len(_str(_args(arg, doc, vars_)[0]))
    if op == "$strLenBytes":
        return len(_str(_args(arg, doc, vars_)[0]).encode("utf-8"))
    if op in ("$trim", "$ltrim", "$rtrim"):
        s = ev(arg.get("input"))
        if s is None:
            return None
        chars = ev(arg["chars"]) if "chars" in arg else None
        f = {"$trim": str.strip, "$ltrim": str.lstrip, "$rtrim": str.rstrip}[op]
        return f(s, chars) if chars is not None else f(s, " \t\n\r\v\f\x00")
    if op == "$split":
        s, sep = _args(arg, doc, vars_)
        return None if s is None else s.split(sep)
    if op == "$indexOfCP":
        a = _args(arg, doc, vars_)
        if a[0] is None:
            return None
        return a[0].find(a[1], int(a[2]) if len(a) > 2 else 0, int(a[3]) if len(a) > 3 else None)
    if op == "$cond":
        if isinstance(arg, dict):
            c, t, e = arg.get("if"), arg.get("then"), arg.get("else")
        else:
            c, t, e = arg
        return ev(t) if _true(ev(c)) else ev(e)
    if op == "$ifNull":
        items = arg if isinstance(arg, list) else [arg]
        for x in items[:-1]:
            r = ev(x)
            if r is not None and r is not REMOVE:
                return r
        return ev(items[-1])
    if op == "$switch":
        for br in arg.get("branches", []):
            if _true(ev(br["case"])):
                return ev(br["then"])
        if "default" not in arg:
            raise SimError(40066, "Location40066", "$switch could not find a matching branch for an input, and no default was specified.")
        return ev(arg["default"])
    if op in ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$cmp"):
        a, b = (None if x is REMOVE else x for x in _args(arg, doc, vars_))
        c = simvalue.cmp_values(a, b)
        return {"$eq": c == 0, "$ne": c != 0, "$gt": c > 0, "$gte": c >= 0, "$lt": c < 0,
                "$lte": c <= 0, "$cmp": c}[op]
    if op == "$and":
        return all(_true(ev(a)) for a in (arg if isinstance(arg, list) else [arg]))
    if op == "$or":
        return any(_true(ev(a)) for a in (arg if isinstance(arg, list) else [arg]))
    if op == "$not":
        return not _true(_args(arg, doc, vars_)[0])
    if op == "$size":
        a = _args(arg, doc, vars_)[0]
        if not isinstance(a, list):
            raise SimError(17124, "Location17124", "The argument to $size must be an array. Type of argument: %s" % _type_name(a))
        return len(a)
    if op == "$isArray":
        return isinstance(_args(arg, doc, vars_)[0], list)
    if op in ("$arrayElemAt", "$first", "$last"):
        if op == "$arrayElemAt":
            a, i = _args(arg, doc, vars_)
        else:
            a, i = _args(arg, doc, vars_)[0], (0 if op == "$first" else -1)
        if a is None:
            return None
        i = int(i)
        return a[i] if -len(a) <= i < len(a) else REMOVE
    if op == "$concatArrays":
        parts = _args(arg, doc, vars_)
        if any(p is None for p in parts):
            return None
        return [x for p in parts for x in p]
    if op == "$reverseArray":
        a = _args(arg, doc, vars_)[0]
        return None if a is None else list(reversed(a))
    if op == "$slice":
        a = _args(arg, doc, vars_)
        arr = a[0]
        if arr is None:
            return None
        if len(a) == 2:
            n = int(a[1])
            return arr[:n] if n >= 0 else arr[n:]
        pos, n = int(a[1]), int(a[2])
        if pos < 0:
            pos = max(0, len(arr) + pos)
        return arr[pos:pos + n]
    if op == "$in":
        x, arr = _args(arg, doc, vars_)
        if not isinstance(arr, list):
            raise SimError(40081, "Location40081", "$in requires an array as a second argument")
        return any(simvalue.cmp_values(x, y) == 0 for y in arr)
    if op == "$range":
        a = [int(_num(x)) for x in _args(arg, doc, vars_)]
        return list(range(a[0], a[1], a[2] if len(a) > 2 else 1))
    if op in ("$map", "$filter"):
        arr = ev(arg["input"])
        if arr is None:
            return None
        name = arg.get("as", "this")
        out = []
        for x in arr:
            v = dict(vars_, **{name: x})
            if op == "$map":
                out.append(evaluate(arg["in"], doc, v))
            elif _true(evaluate(arg["cond"], doc, v)):
                out.append(x)
        return out
    if op == "$reduce":
        arr = ev(arg["input"])
        if arr is None:
            return None
        acc = ev(arg["initialValue"])
        for x in arr:
            acc = evaluate(arg["in"], doc, dict(vars_, this=x, value=acc))
        return acc
    if op == "$let":
        v = dict(vars_)
        for k, e in arg.get("vars", {}).items():
            v[k] = ev(e)
        return evaluate(arg["in"], doc, v)
    if op == "$mergeObjects":
        out = {}
        for d in _args(arg, doc, vars_):
            if d is not None:
                out.update(d)
        return out
    if op == "$toString":
        x = _args(arg, doc, vars_)[0]
        return None if x is None else _str(x)
    if op in ("$toInt", "$toLong", "$toDouble", "$toDecimal"):
        x = _args(arg, doc, vars_)[0]
        if x is None:
            return None
        if isinstance(x, datetime.datetime):
            x = int((x - _EPOCH) / datetime.timedelta(milliseconds=1))
        n = float(x) if isinstance(x, str) and any(c in x for c in ".eE") else \
            (int(x) if isinstance(x, (str, bool)) else _num(x))
        if op == "$toInt":
            return int(n)
        if op == "$toLong":
            return Int64(int(n))
        if op == "$toDouble":
            return float(n)
        return Decimal128(Decimal(str(n)) if isinstance(n, float) else Decimal(n))
    if op == "$toBool":
        x = _args(arg, doc, vars_)[0]
        return None if x is None else _true(x)
    if op == "$type":
        return _type_name(_args(arg, doc, vars_)[0])
    if op == "$bsonSize":
        # size in bytes of a document's BSON; null or missing -> null; else 31393
        x = _args(arg, doc, vars_)[0]
        if x is None or x is REMOVE:
            return None
        if not isinstance(x, dict):
            raise SimError(31393, "Location31393", "$bsonSize requires a document input, found: %s" % _type_name(x))
        return len(simvalue.encode(x))
    raise SimError(168, "InvalidPipelineOperator", "Unrecognized expression '%s'" % op)


def _true(v):
    if v is None or v is False or v is REMOVE:
        return False
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v != 0
    if isinstance(v, Decimal128):
        return v.to_decimal() != 0
    return True
