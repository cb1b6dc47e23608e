#!/usr/bin/env bash
# demo.sh: mongocdc's main job on real data, from a fresh clone.
#
#   1. installs missing packages (scripts/install-deps.sh) and builds into build/;
#   2. starts the MongoDB simulator (a 3-member replica set) loaded with every
#      dataset of ../shared/datasets (MCDC_SHARED_DIR overrides), unless
#      MONGODB_URI names a real replica set;
#   3. starts mongocdc with a config written to a temporary folder: JSON lines
#      on stdout (DEMO_KAFKA=1: the local Kafka broker of scripts/kafka-local.sh);
#   4. waits for the initial snapshot, then inserts, updates, replaces and
#      deletes a few documents (pymongo) and shows the events: the first
#      snapshot records and every streamed change;
#   5. stops everything (SIGTERM; mongocdc writes its final offsets).
#
# Environment: MONGODB_URI, MCDC_SHARED_DIR, DEMO_KAFKA=1, DEMO_KEEP=1 (keep
# the temporary folder), DEMO_TIMEOUT (seconds for the snapshot, default 180),
# DEMO_BUILD_DIR (build folder, default build/).
#
# `scripts/demo.sh sharded` runs the sharded-cluster demo instead
# (scripts/demo-sharded.sh: a simulated cluster of three shards, one mongocdc);
# `scripts/demo.sh sharded merged` runs it with one stream through mongos.
set -euo pipefail

if [ "${1:-}" = sharded ]; then
  exec "$(dirname "${BASH_SOURCE[0]}")/demo-sharded.sh" "${@:2}"
fi

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
SHARED=${MCDC_SHARED_DIR:-$ROOT/../shared}
TIMEOUT=${DEMO_TIMEOUT:-180}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/mongocdc-demo.XXXXXX")
SIM_PID="" CDC_PID="" KAFKA_STARTED="" USE_KAFKA=""

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
die() { echo "demo: $*" >&2; exit 1; }

cleanup() {
  set +e
  if [ -n "$CDC_PID" ] && kill -0 "$CDC_PID" 2>/dev/null; then
    kill -TERM "$CDC_PID"; for _ in $(seq 1 100); do kill -0 "$CDC_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$CDC_PID" 2>/dev/null
  fi
  if [ -n "$SIM_PID" ] && kill -0 "$SIM_PID" 2>/dev/null; then
    kill -TERM "$SIM_PID"; for _ in $(seq 1 50); do kill -0 "$SIM_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$SIM_PID" 2>/dev/null
  fi
  [ -n "$KAFKA_STARTED" ] && scripts/kafka-local.sh stop >/dev/null 2>&1
  if [ "${DEMO_KEEP:-0}" = 1 ]; then echo "demo: files kept in $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Waits up to $1 seconds for the command "$2..." to succeed.
wait_for() {
  local t=$1; shift
  local end=$((SECONDS + t))
  until "$@"; do
    [ $SECONDS -lt $end ] || return 1
    sleep 0.5
  done
}

say "dependencies and build"
scripts/install-deps.sh || echo "demo: install-deps failed; trying to build with what is installed"
BUILD=${DEMO_BUILD_DIR:-$ROOT/build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" --target mongocdc -j"$(nproc)" >/dev/null
BIN=$BUILD/mongocdc
"$BIN" --version

if [ -n "${MONGODB_URI:-}" ]; then
  URI=$MONGODB_URI
  say "using MongoDB at the given MONGODB_URI"
else
  [ -d "$SHARED/datasets" ] || die "datasets not found in $SHARED (set MCDC_SHARED_DIR)"
  say "starting the MongoDB simulator with $SHARED/datasets"
  LOADS=()
  for f in "$SHARED"/datasets/*/*.json; do
    db=$(basename "$(dirname "$f")"); coll=$(basename "$f" .json)
    LOADS+=(--load "$f:$db.$coll")
  done
  "$PY" tests/mongosim/mongosim.py --topology replset --members 3 --base-port 0 "${LOADS[@]}" \
    >"$WORK/sim.out" 2>"$WORK/sim.err" &
  SIM_PID=$!
  wait_for 120 grep -q '"ready"' "$WORK/sim.out" || { tail -20 "$WORK/sim.err"; die "simulator did not start"; }
  URI=$("$PY" -c 'import json,sys
for l in open(sys.argv[1]):
    l=l.strip()
    if l.startswith("{") and json.loads(l).get("ready"): print(json.loads(l)["uri"]); break' "$WORK/sim.out")
  echo "simulator ready: $URI"
fi

SINK="sink.type: stdout"
BOOTSTRAP=""
if [ "${DEMO_KAFKA:-0}" = 1 ]; then
  say "starting the local Kafka broker"
  WAS_RUNNING=""
  if scripts/kafka-local.sh status >/dev/null 2>&1; then WAS_RUNNING=1; fi
  if BOOTSTRAP=$(scripts/kafka-local.sh start | tail -1); then
    [ -n "$WAS_RUNNING" ] || KAFKA_STARTED=1
    USE_KAFKA=1
    SINK="sink.type: kafka
kafka:
  bootstrap.servers: \"$BOOTSTRAP\""
  else
    echo "demo: the local broker did not start; showing JSON lines on stdout instead"
  fi
fi

cat >"$WORK/mongocdc.yaml" <<YAML
topic.prefix: demo
mongodb.connection.string: "$URI"
snapshot.mode: initial
snapshot.max.threads: 2
cursor.max.await.time.ms: 500
offsets.storage: file
offsets.file.path: "$WORK/offsets.json"
offsets.flush.interval.ms: 1000
log.level: info
$SINK
YAML
say "mongocdc config ($WORK/mongocdc.yaml)"
sed 's/\(connection.string: "mongodb:\/\/\)[^@"]*@/\1****@/' "$WORK/mongocdc.yaml"

say "starting mongocdc"
"$BIN" -c "$WORK/mongocdc.yaml" >"$WORK/events.jsonl" 2>"$WORK/mongocdc.log" &
CDC_PID=$!

snapshot_done() {
  kill -0 "$CDC_PID" 2>/dev/null || { tail -20 "$WORK/mongocdc.log"; die "mongocdc exited"; }
  grep -q 'snapshot complete' "$WORK/mongocdc.log"
}
wait_for "$TIMEOUT" snapshot_done || { tail -20 "$WORK/mongocdc.log"; die "snapshot did not finish in ${TIMEOUT}s"; }
grep -E 'snapshot (complete|of .* finished)' "$WORK/mongocdc.log" | sed 's/^/  /'

say "making changes: inserts, an update, a replace and deletes (pymongo)"
"$PY" - "$URI" <<'PYEOF'
import sys, datetime
from pymongo import MongoClient
c = MongoClient(sys.argv[1], serverSelectionTimeoutMS=10000)
orders = c.demo.orders
orders.insert_one({"_id": 1, "item": "notebook", "qty": 3, "price": 4.5})
orders.insert_one({"_id": 2, "item": "pencil", "qty": 10, "tags": ["office", "school"]})
orders.insert_one({"_id": 3, "item": "eraser", "qty": 1})
# The updated document is left alone afterwards: with the default updateLookup the
# update's `after` is read when the event is sent, so deleting the document right
# after the update would make `after` null or not depending on timing (README).
orders.update_one({"_id": 1}, {"$set": {"qty": 4}, "$unset": {"price": ""}})
orders.replace_one({"_id": 2}, {"item": "pencil", "qty": 12, "at": datetime.datetime(2024, 1, 2)})
orders.delete_one({"_id": 3})
cust = c.sample_analytics.customers
doc = cust.find_one({}, {"_id": 1, "username": 1})
cust.update_one({"_id": doc["_id"]}, {"$set": {"active": False}})
users = c.sample_mflix.users
u = users.find_one({}, {"_id": 1, "name": 1})
users.delete_one({"_id": u["_id"]})
print("  demo.orders: 3 inserts, 1 update, 1 replace, 1 delete (of another document)")
print("  sample_analytics.customers: update of %s (%s)" % (doc["_id"], doc.get("username")))
print("  sample_mflix.users: delete of %s (%s)" % (u["_id"], u.get("name")))
PYEOF

streamed() {
  if [ -n "$USE_KAFKA" ]; then return 0; fi
  [ "$(grep -c '"op":"[cud]"' "$WORK/events.jsonl" || true)" -ge 8 ]
}
wait_for 30 streamed || echo "demo: not every change arrived within 30 s"
sleep 1

say "stopping mongocdc (SIGTERM: flush, final offsets)"
kill -TERM "$CDC_PID"
rc=0; wait "$CDC_PID" || rc=$?
CDC_PID=""
echo "mongocdc exited with status $rc"
echo "final offsets: $(cat "$WORK/offsets.json" 2>/dev/null || echo none)"

if [ -n "$USE_KAFKA" ]; then
  say "reading the topics back from Kafka"
  "$PY" - "$BOOTSTRAP" "$WORK/events.jsonl" <<'PYEOF'
import json, sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "mongocdc-demo", "auto.offset.reset": "earliest", "enable.auto.commit": False})
md = c.list_topics(timeout=10)
topics = [t for t in md.topics if t.startswith("demo.")]
c.subscribe(topics)
out = open(sys.argv[2], "w")
recs = []
idle = 0
while idle < 5:
    m = c.poll(1.0)
    if m is None:
        idle += 1; continue
    if m.error(): continue
    idle = 0
    recs.append(m)
# One consumer over every topic returns them grouped by partition; print them in produce
# order: by the record's Kafka timestamp (the producer's create time, ms), ties in the
# order polled (which keeps each partition's order).
recs.sort(key=lambda m: m.timestamp()[1])
for m in recs:
    out.write('{"topic":%s,"key":%s,"value":%s}\n' % (json.dumps(m.topic()), (m.key() or b"null").decode(), (m.value() or b"null").decode()))
c.close()
PYEOF
fi

say "events"
"$PY" - "$WORK/events.jsonl" <<'PYEOF'
import json, sys, collections
recs = []
for line in open(sys.argv[1], encoding="utf-8"):
    line = line.strip()
    if line:
        recs.append(json.loads(line))
def op(r):
    v = r.get("value")
    if v is None: return "tombstone"
    return (v.get("payload", v) or {}).get("op")
counts = collections.Counter((r["topic"], op(r)) for r in recs)
print("records per topic and op:")
for (t, o), n in sorted(counts.items()):
    print("  %-40s %-9s %6d" % (t, o, n))
snap = [r for r in recs if op(r) == "r"]
print("\nfirst snapshot records (of %d):" % len(snap))
for r in snap[:2]:
    print(json.dumps(r, indent=2)[:1500])
print("\nstreamed changes (one record per line, key and value bytes as produced):")
for line in open(sys.argv[1], encoding="utf-8"):
    line = line.strip()
    if line and op(json.loads(line)) in ("c", "u", "d", "tombstone"):
        print(line)
PYEOF
echo "exit status of mongocdc: $rc"
exit "$rc"
