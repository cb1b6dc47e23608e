#!/usr/bin/python3
"""Generate BSON documents for the extended-JSON differential test.

Writes raw concatenated BSON to stdout (or --out FILE). Elements are encoded
by hand (not through pymongo's encoder) so that every BSON type can appear,
including deprecated ones (undefined, DBPointer, symbol), dates far outside
Python's datetime range, any double bit pattern and any Decimal128 bit
pattern. Well-formedness is checked by the readers under test (libbson and
the Java driver), which reject malformed input.

Sets:
  mixed    (default) --count documents with random fields of every type
  bmp      every BSON-legal BMP code point, 256 per string, in strings and keys
  invalid  strings and keys holding invalid UTF-8 byte sequences

Usage: gen_docs.py [--set mixed|bmp|invalid] [--count N] [--seed S] [--out FILE]
"""
import argparse
import random
import struct
import sys
import unicodedata

import bson
from bson.decimal128 import Decimal128

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


# --- element encoding -------------------------------------------------------

def cstring(b):
    assert b"\x00" not in b
    return b + b"\x00"


def bstring(b):
    return struct.pack("<i", len(b) + 1) + b + b"\x00"


def document(elements):
    body = b"".join(elements)
    return struct.pack("<i", len(body) + 5) + body + b"\x00"


def elem(tbyte, key, payload):
    return bytes([tbyte]) + cstring(key) + payload


# --- random values ----------------------------------------------------------

def category_pools():
    """Code points per general category (Python's Unicode tables; the
    category only steers the sampling, the writers decide the escaping)."""
    pools = {}
    for cp in list(range(0x80, 0x30000)) + list(range(0xE0000, 0xE0200)):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        pools.setdefault(unicodedata.category(chr(cp)), []).append(cp)
    pools["Co"] = pools.get("Co", []) + list(range(0xF0000, 0xF0100)) + [0x10FFFD]
    return pools


POOLS = None


def rand_char(rng):
    r = rng.random()
    if r < 0.45:
        return chr(rng.randrange(0x00, 0x80))
    if r < 0.55:
        return rng.choice('"\\/\b\f\n\r\t\x00\x1f\x7f<>&\'')
    if r < 0.70:
        while True:
            cp = rng.randrange(0x80, 0x10000)
            if not 0xD800 <= cp <= 0xDFFF:
                return chr(cp)
    if r < 0.75:
        return chr(rng.randrange(0x10000, 0x110000))
    cat = rng.choice(sorted(POOLS))
    return chr(rng.choice(POOLS[cat]))


def rand_text(rng, maxlen=24, allow_nul=True):
    n = rng.choice([0, 1, 2, 3, 5, 8, 13, maxlen])
    s = "".join(rand_char(rng) for _ in range(rng.randrange(0, n + 1)))
    if not allow_nul:
        s = s.replace("\x00", "")
    return s.encode("utf-8")


SPECIAL_DOUBLES = [
    0.0, -0.0, 1.0, -1.0, 10.0, 0.1, 0.001, 0.0001, 1e-3, 9.999e-4, 1e7, 9999999.0,
    9999999.999999998, 1e7 - 1e-9, 12.34, 3.14, 100.0, 1000.0, 123456789.0, 1.0e23, 2.0e-3,
    5e-324, 2.2250738585072014e-308, 2.225073858507201e-308, 1.7976931348623157e308,
    4.9e-324, 2.0**63, 2.0**64, 2.0**53, 2.0**53 + 2, 9007199254740993.0, 0.30000000000000004,
    1 / 3, 2 / 3, 1e21, 1e22, 1e-7, 1.2345678e7, 2.82879384806159e17, 1.0e-5,
    float("nan"), float("inf"), float("-inf"),
]


def rand_double(rng):
    r = rng.random()
    if r < 0.15:
        return struct.pack("<d", rng.choice(SPECIAL_DOUBLES))
    if r < 0.55:
        return struct.pack("<Q", rng.getrandbits(64))
    if r < 0.70:
        return struct.pack("<d", round(rng.uniform(-1e6, 1e6), rng.randrange(0, 8)))
    if r < 0.85:
        return struct.pack("<d", rng.choice([1, -1]) * rng.choice([1, 2, 5, 1.5, 9.99])
                           * float("1e%d" % rng.randrange(-330, 310)))
    # Powers of two and their neighbours: the asymmetric rounding intervals.
    v = 2.0 ** rng.randrange(-1074, 1024)
    bits = struct.unpack("<Q", struct.pack("<d", v))[0] + rng.choice([-1, 0, 1])
    return struct.pack("<Q", bits & (2**64 - 1))


def rand_int64(rng):
    return rng.choice([INT64_MIN, INT64_MAX, 0, -1, 1, INT32_MAX + 1, INT32_MIN - 1,
                       rng.randrange(INT64_MIN, INT64_MAX + 1),
                       rng.randrange(-10**6, 10**6)])


def rand_date(rng):
    return rng.choice([INT64_MIN, INT64_MAX, -1, 0, 1, 999, 1000, 253402300799999,
                       253402300800000, -62135596800000, 1694627139123, 1426846530120,
                       rng.randrange(0, 253402300800000), rng.randrange(INT64_MIN, INT64_MAX + 1),
                       rng.randrange(-10**13, 10**13), rng.randrange(0, 86400000) * 1000,
                       rng.randrange(0, 2**40) * 10])


DEC_SPECIAL = ["NaN", "-NaN", "Infinity", "-Infinity", "0", "-0", "0E+3", "0E-3", "-0E-6176",
               "0E+6111", "1E+3", "1.0E-7", "0.000001", "0.0000001", "123.45678", "19.99",
               "9.999999999999999999999999999999999E+6144", "1E-6176", "-1E-6176",
               "1234567890123456789012345678901234", "1.000000000000000000000000000000000E+6144",
               "100", "1E2", "1.00E+2", "-0.00", "12345E-10", "1E+33", "1E+34"]


def rand_decimal(rng):
    r = rng.random()
    if r < 0.35:
        return Decimal128(rng.choice(DEC_SPECIAL)).bid
    if r < 0.6:
        # Random bit patterns: any combination field, including non-canonical
        # coefficients (read as zero) and signalling NaNs.
        return rng.getrandbits(128).to_bytes(16, "little")
    digits = "".join(rng.choice("0123456789") for _ in range(rng.randrange(1, 35)))
    return Decimal128("%s%sE%d" % (rng.choice(["", "-"]), digits, rng.randrange(-6176 + 34, 6111 - 34))).bid


BIN_SUBTYPES = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0x0A, 0x7F, 0x80, 0x81, 0xAB, 0xFF]


def rand_binary(rng):
    st = rng.choice(BIN_SUBTYPES) if rng.random() < 0.7 else rng.randrange(256)
    n = 16 if st in (3, 4) and rng.random() < 0.8 else rng.randrange(0, 41)
    data = bytes(rng.getrandbits(8) for _ in range(n))
    if st == 2:
        inner = struct.pack("<i", n) + data
        return struct.pack("<i", len(inner)) + bytes([st]) + inner
    return struct.pack("<i", n) + bytes([st]) + data


def rand_regex(rng):
    flags = list(rng.sample("imsxlu", rng.randrange(0, 7)))
    if rng.random() < 0.1:
        flags.append(rng.choice("abcdzAZ"))
    rng.shuffle(flags)
    return cstring(rand_text(rng, 16, allow_nul=False)) + cstring("".join(flags).encode())


def rand_oid(rng):
    return bytes(rng.getrandbits(8) for _ in range(12))


def rand_key(rng, i):
    if rng.random() < 0.7:
        return ("k%d" % i).encode()
    k = rand_text(rng, 10, allow_nul=False)
    return k if k else b"k"


def rand_value(rng, depth):
    """Returns (type byte, payload)."""
    kinds = ["double", "string", "int32", "int64", "bool", "null", "oid", "date", "ts",
             "binary", "regex", "decimal", "minkey", "maxkey", "undefined", "dbpointer",
             "symbol", "code", "codewscope"]
    if depth < 3:
        kinds += ["doc", "array", "doc", "array"]
    kind = rng.choice(kinds)
    if kind == "double":
        return 0x01, rand_double(rng)
    if kind == "string":
        return 0x02, bstring(rand_text(rng))
    if kind == "doc":
        return 0x03, rand_document(rng, depth + 1)
    if kind == "array":
        n = rng.randrange(0, 6)
        return 0x04, document([_array_elem(rng, depth, i) for i in range(n)])
    if kind == "binary":
        return 0x05, rand_binary(rng)
    if kind == "undefined":
        return 0x06, b""
    if kind == "oid":
        return 0x07, rand_oid(rng)
    if kind == "bool":
        return 0x08, bytes([rng.randrange(2)])
    if kind == "date":
        return 0x09, struct.pack("<q", rand_date(rng))
    if kind == "null":
        return 0x0A, b""
    if kind == "regex":
        return 0x0B, rand_regex(rng)
    if kind == "dbpointer":
        return 0x0C, bstring(rand_text(rng, 12)) + rand_oid(rng)
    if kind == "code":
        return 0x0D, bstring(rand_text(rng))
    if kind == "symbol":
        return 0x0E, bstring(rand_text(rng))
    if kind == "codewscope":
        code = bstring(rand_text(rng))
        scope = rand_document(rng, 3)
        return 0x0F, struct.pack("<i", 4 + len(code) + len(scope)) + code + scope
    if kind == "int32":
        return 0x10, struct.pack("<i", rng.choice([INT32_MIN, INT32_MAX, 0, -1,
                                                   rng.randrange(INT32_MIN, INT32_MAX + 1)]))
    if kind == "ts":
        return 0x11, struct.pack("<II", rng.choice([0, 1, 2**32 - 1, rng.getrandbits(32)]),
                                 rng.choice([0, 1, 2**32 - 1, rng.getrandbits(32)]))
    if kind == "int64":
        return 0x12, struct.pack("<q", rand_int64(rng))
    if kind == "decimal":
        return 0x13, rand_decimal(rng)
    if kind == "minkey":
        return 0xFF, b""
    return 0x7F, b""


def _array_elem(rng, depth, i):
    t, p = rand_value(rng, depth + 1)
    return elem(t, str(i).encode(), p)


def rand_document(rng, depth):
    n = rng.randrange(0, 5 if depth else 12)
    return document([elem(*_swap(rand_value(rng, depth), rand_key(rng, i))) for i in range(n)])


def _swap(tv, key):
    return tv[0], key, tv[1]


ID_KINDS = [(0x10, lambda r: struct.pack("<i", r.randrange(INT32_MIN, INT32_MAX + 1))),
            (0x12, lambda r: struct.pack("<q", rand_int64(r))),
            (0x01, rand_double),
            (0x02, lambda r: bstring(rand_text(r))),
            (0x07, rand_oid),
            (0x05, rand_binary),
            (0x09, lambda r: struct.pack("<q", rand_date(r))),
            (0x13, rand_decimal),
            (0x03, lambda r: rand_document(r, 2))]


def mixed_docs(rng, count):
    for i in range(count):
        t, gen = rng.choice(ID_KINDS)
        body = [elem(t, b"_id", gen(rng))]
        if rng.random() < 0.05:
            # Wide documents, some with repeated names (and a repeated _id):
            # Debezium's map-backed documents keep the first position and
            # the last value.
            nkeys = rng.randrange(20, 300)
            for j in range(nkeys):
                k = ("f%d" % rng.randrange(nkeys * 2 if rng.random() < 0.5 else 10**6)).encode()
                if rng.random() < 0.01:
                    k = b"_id"
                tv = rand_value(rng, 2)
                body.append(elem(tv[0], k, tv[1]))
            yield document(body)
            continue
        for j in range(rng.randrange(0, 12)):
            tv = rand_value(rng, 0)
            body.append(elem(tv[0], rand_key(rng, j), tv[1]))
        doc = document(body)
        # Not checked with bson.decode: pymongo cannot represent dates past
        # year 9999; the writers under test reject malformed BSON themselves.
        yield doc


def bmp_docs():
    cps = [cp for cp in range(1, 0x10000) if not 0xD800 <= cp <= 0xDFFF]
    for i in range(0, len(cps), 256):
        chunk = "".join(chr(cp) for cp in cps[i:i + 256]).encode("utf-8")
        doc = document([elem(0x02, b"_id", bstring(chunk)), elem(0x02, chunk, bstring(chunk))])
        bson.decode(doc)
        yield doc


INVALID_SEQS = [b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xc2", b"\xc2A", b"\xe0\x80\x80",
                b"\xe0\x9f\xbf", b"\xe0\xa0", b"\xe1\x80", b"\xe1\x80A", b"\xed\xa0\x80",
                b"\xed\xbf\xbf", b"\xef\xbf", b"\xf0\x80\x80\x80", b"\xf0\x8f\xbf\xbf",
                b"\xf0\x90", b"\xf0\x90\x80", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80",
                b"\xf8\x88\x80\x80\x80", b"\xfe", b"\xff", b"\xf0\x90\x80A", b"\xf0A",
                b"\xe0\x80", b"\xe0\xa0A", b"\xf4\x8f\xbf\xbf", b"\xf1\x80\x80"]


# Sequences that JDK 17 decodes to a single U+FFFD when an ASCII byte follows.
SINGLE_REPLACEMENT = [b"\xff", b"\xfe", b"\x80", b"\xed\xa0\x80", b"\xe1\x80", b"\xc2",
                      b"\xf0\x90\x80"]


def invalid_docs(rng, count):
    for i in range(count):
        parts = []
        for _ in range(rng.randrange(1, 6)):
            r = rng.random()
            if r < 0.4:
                parts.append(rng.choice(INVALID_SEQS))
            elif r < 0.6:
                parts.append(bytes(rng.getrandbits(8) | 0x80 for _ in range(rng.randrange(1, 4))))
            else:
                parts.append(rand_text(rng, 6, allow_nul=False))
        s = b"".join(parts)
        key = s.replace(b"\x00", b"") or b"k"
        body = [elem(0x10, b"_id", struct.pack("<i", i)), elem(0x02, b"s", bstring(s)),
                elem(0x02, key, bstring(b"v"))]
        if rng.random() < 0.3:
            # Two names with different bytes that Java decodes to the same
            # string (one U+FFFD each): one map entry, first position, last value.
            a, b = rng.sample(SINGLE_REPLACEMENT, 2)
            body.insert(1, elem(0x10, b"x" + a + b"y", struct.pack("<i", 1)))
            body.append(elem(0x10, b"x" + b + b"y", struct.pack("<i", 2)))
        yield document(body)


def main():
    global POOLS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", choices=["mixed", "bmp", "invalid"], default="mixed")
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=20240917)
    ap.add_argument("--out")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    if args.set == "mixed":
        POOLS = category_pools()
        docs = mixed_docs(rng, args.count)
    elif args.set == "bmp":
        docs = bmp_docs()
    else:
        POOLS = category_pools()
        docs = invalid_docs(rng, args.count)
    out = open(args.out, "wb") if args.out else sys.stdout.buffer
    for d in docs:
        out.write(d)
    out.flush()


if __name__ == "__main__":
    main()
