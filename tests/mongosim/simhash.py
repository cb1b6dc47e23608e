"""MongoDB's hashed shard key / hashed index value: BSONElementHasher::hash64.

Real MongoDB places a document of a collection sharded on {f: "hashed"} by the
64-bit hash of f's value, and the chunk bounds in config.chunks are those hash
values (NumberLong), so the simulator computes the same function for its chunk
ranges to match a real cluster: the first 8 bytes (little-endian, signed) of
MD5 over the seed (int32 LE; 0 for shard keys), the value's canonical type
(int32 LE) and its value. Numbers (int, long, double, decimal) are hashed as
one int64 LE (doubles truncated toward zero, decimals rounded half to even, NaN as
0, clamped to the int64 range, a double of exactly 2^63 as -2^63) so
that equal numbers of different types hash alike; documents and arrays as each
element (canonical type, field name with its NUL, value) then an end marker
(type 0, no name); code with scope as the code's C string then its scope; every
other type as its raw BSON value bytes. The expected values of MongoDB's
src/mongo/db/hasher_test.cpp are checked in tests/mongosim/tests/test_simhash.py.
"""
import decimal
import hashlib
import math
import struct

from bson.int64 import Int64

import simvalue

# BSON type byte -> MongoDB canonical type.
_CANON = {0xFF: -1, 0x00: 0, 0x06: 0, 0x0A: 5, 0x01: 10, 0x10: 10, 0x12: 10, 0x13: 10,
          0x02: 15, 0x0E: 15, 0x03: 20, 0x04: 25, 0x05: 30, 0x07: 35, 0x08: 40, 0x09: 45,
          0x11: 45, 0x0B: 50, 0x0C: 55, 0x0D: 60, 0x0F: 65, 0x7F: 127}
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1


def _cstr_end(buf, i):
    return buf.index(b"\0", i) + 1


def _value_end(t, buf, i):
    """End offset of the value of type t starting at i."""
    if t in (0x01, 0x09, 0x11, 0x12):
        return i + 8
    if t in (0x02, 0x0D, 0x0E):
        return i + 4 + struct.unpack_from("<i", buf, i)[0]
    if t in (0x03, 0x04, 0x0F):
        return i + struct.unpack_from("<i", buf, i)[0]
    if t == 0x05:
        return i + 5 + struct.unpack_from("<i", buf, i)[0]
    if t in (0x06, 0x0A, 0xFF, 0x7F):
        return i
    if t == 0x07:
        return i + 12
    if t == 0x08:
        return i + 1
    if t == 0x0B:
        return _cstr_end(buf, _cstr_end(buf, i))
    if t == 0x0C:
        return i + 4 + struct.unpack_from("<i", buf, i)[0] + 12
    if t == 0x10:
        return i + 4
    if t == 0x13:
        return i + 16
    raise ValueError("unknown BSON type 0x%02x" % t)


def _squash(x):
    if isinstance(x, float):
        if math.isnan(x):
            return 0
        if x == 9223372036854775808.0:
            return I64_MIN  # safeNumberLongForHash keeps older servers' overflowing cast
        if x > 9223372036854775808.0:
            return I64_MAX
        if x < -9223372036854775808.0:
            return I64_MIN
        return int(x)
    return max(I64_MIN, min(I64_MAX, int(x)))


def _number(t, buf, i):
    if t == 0x01:
        return _squash(struct.unpack_from("<d", buf, i)[0])
    if t == 0x10:
        return struct.unpack_from("<i", buf, i)[0]
    if t == 0x12:
        return struct.unpack_from("<q", buf, i)[0]
    from bson.decimal128 import Decimal128
    d = Decimal128.from_bid(bytes(buf[i:i + 16])).to_decimal()
    if d.is_nan():
        return 0
    if d.is_infinite():
        return I64_MAX if d > 0 else I64_MIN
    # Decimal128::toLong: clamped, else rounded half to even
    return _squash(int(d.to_integral_value(rounding=decimal.ROUND_HALF_EVEN)))


def _elements(m, buf, start, end):
    """Each element of the embedded document at buf[start:end], then the end marker."""
    i = start + 4
    while buf[i] != 0:
        t = buf[i]
        name_end = _cstr_end(buf, i + 1)
        _element(m, t, buf[i + 1:name_end], buf, name_end)
        i = _value_end(t, buf, name_end)
    m.update(struct.pack("<i", 0))


def _element(m, t, name, buf, i):
    m.update(struct.pack("<i", _CANON[t]))
    if name is not None:
        m.update(name)
    if t in (0x01, 0x10, 0x12, 0x13):
        m.update(struct.pack("<q", _number(t, buf, i)))
    elif t in (0x03, 0x04):
        _elements(m, buf, i, _value_end(t, buf, i))
    elif t == 0x0F:
        n = struct.unpack_from("<i", buf, i + 4)[0]
        m.update(buf[i + 8:i + 8 + n])  # the code's C string, with its NUL
        _elements(m, buf, i + 8 + n, _value_end(t, buf, i))
    else:
        m.update(buf[i:_value_end(t, buf, i)])


def hash64(value, seed=0):
    """hash64 of a simulator value (None hashes as null) as a Python int."""
    buf = simvalue.encode({"v": value})
    t = buf[4]
    m = hashlib.md5()
    m.update(struct.pack("<i", seed))
    _element(m, t, None, buf, 7)  # 4-byte length, type, "v\0"
    return struct.unpack("<q", m.digest()[:8])[0]


def hashed_value(value):
    """The shard key value of a hashed field as config.chunks bounds hold it."""
    return Int64(hash64(value))
