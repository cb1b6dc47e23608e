"""Change-stream resume tokens and oplog timestamp keys for the MongoDB simulator.

Resume tokens in KeyString V1 layout (mongo-sim-spec.md §3.11, server `key_string.cpp` /
`resume_token.cpp`): the KeyString encoding of BSON values with their type bits, building a
token `{_data, _typeBits}` and decoding a token's fixed prefix (malformed tokens fail as §3.12
says). ts_key/key_ts turn a bson Timestamp into the integer the oplog is ordered by and back.
"""

import datetime
import struct
import uuid

from bson.binary import Binary
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.objectid import ObjectId
from bson.regex import Regex
from bson.timestamp import Timestamp

from simvalue import SimError, UNDEFINED, _bin_parts, canon

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
