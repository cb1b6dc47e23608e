#!/usr/bin/env bash
# demo-sharded.sh: mongocdc capturing a whole sharded cluster with one daemon
# (run it as `scripts/demo.sh sharded`, or directly).
#
#   1. builds into build/ (DEMO_BUILD_DIR overrides);
#   2. starts the MongoDB simulator's sharded topology: a config server
#      replica set, DEMO_SHARDS shard replica sets (default 3) and a mongos;
#      shards shop.orders on _id over the shards and writes shop.orders
#      (sharded) and shop.customers (unsharded);
#   3. starts mongocdc pointed at the config servers (JSON lines to a file):
#      one capture task per shard, named after it; with the argument `merged`
#      (or DEMO_MODE=merged) it points at the mongos instead, with
#      mongodb.connection.mode sharded: one change stream for the cluster;
#   4. after the initial snapshot, writes to both collections while a chunk
#      migration moves part of shop.orders to another shard, then shows the
#      events per shard and checks that every document was read once and that
#      the migration produced no event;
#   5. stops everything (SIGTERM; every task writes its final offsets).
#
# Environment: DEMO_SHARDS, DEMO_KEEP=1 (keep the temporary folder),
# DEMO_BUILD_DIR. DEMO_KAFKA is not used: this demo checks the events it
# reads back from a JSON-lines file (scripts/demo.sh's replica-set demo is
# the one that produces to Kafka).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
SHARDS=${DEMO_SHARDS:-3}
MODE=${1:-${DEMO_MODE:-per-shard}}
case "$MODE" in per-shard|merged) ;; *) echo "demo: mode is per-shard or merged" >&2; exit 2 ;; esac
if [ "${DEMO_KAFKA:-0}" = 1 ]; then
  echo "demo: DEMO_KAFKA=1 applies to the replica-set demo (scripts/demo.sh); the sharded demo" \
    "writes JSON lines to a file and checks them" >&2
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/mongocdc-demo-sharded.XXXXXX")
SIM_PID="" CDC_PID=""

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
die() { echo "demo: $*" >&2; exit 1; }
cleanup() {
  set +e
  for pid in "$CDC_PID" "$SIM_PID"; do
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid"; for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$pid" 2>/dev/null
    fi
  done
  if [ "${DEMO_KEEP:-0}" = 1 ]; then echo "demo: files kept in $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "build"
BUILD=${DEMO_BUILD_DIR:-$ROOT/build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" --target mongocdc -j"$(nproc)" >/dev/null
BIN=$BUILD/mongocdc

say "starting a simulated sharded cluster ($SHARDS shards, config servers, one mongos)"
"$PY" tests/mongosim/mongosim.py --topology sharded --shards "$SHARDS" --members 1 --base-port 0 \
  --noop-interval 0.5 >"$WORK/sim.out" 2>"$WORK/sim.err" &
SIM_PID=$!
for _ in $(seq 1 240); do grep -q '"ready"' "$WORK/sim.out" 2>/dev/null && break; sleep 0.5; done
grep -q '"ready"' "$WORK/sim.out" || { tail -20 "$WORK/sim.err"; die "simulator did not start"; }
INFO=$(grep '"ready"' "$WORK/sim.out" | head -1)
MONGOS=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["uri"])' "$INFO")
CONFIG=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["config_uri"])' "$INFO")
echo "mongos: $MONGOS"
echo "config servers: $CONFIG"

"$PY" - "$MONGOS" "$SHARDS" <<'PY'
import sys, pymongo
c = pymongo.MongoClient(sys.argv[1], serverSelectionTimeoutMS=10000)
n = int(sys.argv[2])
c.admin.command("enableSharding", "shop")
c.admin.command("shardCollection", "shop.orders", key={"_id": 1})
for k in range(1, n):
    c.admin.command("split", "shop.orders", middle={"_id": k * 1000})
    c.admin.command("moveChunk", "shop.orders", find={"_id": k * 1000}, to="shard%02d" % (k + 1))
c.shop.orders.insert_many([{"_id": i, "item": "o%d" % i, "qty": i % 7} for i in range(0, n * 1000, 10)])
c.shop.customers.insert_many([{"_id": "c%d" % i, "name": "customer %d" % i} for i in range(50)])
print("shop.orders: %d documents over %d shards; shop.customers: 50 documents (unsharded)"
      % (c.shop.orders.count_documents({}), n))
PY

if [ "$MODE" = merged ]; then
  SEED=$MONGOS TASKS=1
  EXTRA='mongodb.connection.mode: sharded'
else
  SEED=$CONFIG TASKS=$SHARDS
  EXTRA='mongodb.connection.mode: replica_set'
fi
cat >"$WORK/mongocdc.yaml" <<YAML
topic.prefix: demo
mongodb.connection.string: "$SEED"
$EXTRA
mongodb.poll.interval.ms: 2000
snapshot.mode: initial
cursor.max.await.time.ms: 500
offsets.storage: file
offsets.file.path: "$WORK/offsets.json"
offsets.flush.interval.ms: 1000
log.level: info
sink.type: file
sink.path: "$WORK/events.jsonl"
YAML
say "mongocdc config ($WORK/mongocdc.yaml)"
cat "$WORK/mongocdc.yaml"

if [ "$MODE" = merged ]; then
  say "starting mongocdc (one change stream through mongos)"
else
  say "starting mongocdc (one capture task per shard)"
fi
"$BIN" -c "$WORK/mongocdc.yaml" 2>"$WORK/mongocdc.log" &
CDC_PID=$!
for _ in $(seq 1 240); do
  [ "$(grep -c 'streaming changes from' "$WORK/mongocdc.log" 2>/dev/null || true)" -ge "$TASKS" ] && break
  kill -0 "$CDC_PID" 2>/dev/null || { cat "$WORK/mongocdc.log"; die "mongocdc exited"; }
  sleep 0.5
done
grep -E "found at|shard shard|snapshot complete" "$WORK/mongocdc.log" | sed 's/^[^ ]* //'

say "writes on every shard while a chunk migration runs"
"$PY" - "$MONGOS" "$SHARDS" <<'PY'
import sys, pymongo
c = pymongo.MongoClient(sys.argv[1], serverSelectionTimeoutMS=10000)
n = int(sys.argv[2])
for i in range(0, n * 1000, 100):
    c.shop.orders.update_one({"_id": i}, {"$inc": {"qty": 1}})
c.admin.command("moveChunk", "shop.orders", find={"_id": 0}, to="shard%02d" % n)
print("moved the chunk holding _id 0 to shard%02d" % n)
for i in range(0, 1000, 100):
    c.shop.orders.update_one({"_id": i}, {"$inc": {"qty": 1}})
c.shop.orders.insert_one({"_id": 99999, "item": "new"})
c.shop.customers.update_one({"_id": "c1"}, {"$set": {"name": "renamed"}})
PY
sleep 3

say "events by shard and operation"
"$PY" - "$WORK/events.jsonl" "$SHARDS" <<'PY'
import collections, json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().endswith("}")]
data = [r for r in rows if r.get("value") and r["topic"].count(".") >= 2]
by = collections.Counter((r["value"]["source"]["rs"], r["topic"], r["value"]["op"]) for r in data)
for (rs, topic, op), n in sorted(by.items()):
    print("  %-8s %-20s op=%s  %d" % (rs, topic, op, n))
reads = [(r["key"] if isinstance(r["key"], dict) else json.loads(r["key"]))["id"] for r in data if r["value"]["op"] == "r"]
dup = len(reads) - len(set(reads))
print("snapshot: %d documents, %d read twice" % (len(reads), dup))
streamed = [r for r in data if r["value"]["op"] != "r"]
want = int(sys.argv[2]) * 10 + 10 + 2
print("streamed: %d changes (expected %d: the migration itself produced none)" % (len(streamed), want))
sys.exit(0 if dup == 0 and len(streamed) == want else 1)
PY

say "stopping mongocdc (SIGTERM): every task writes its final offsets"
kill -TERM "$CDC_PID"; st=0; wait "$CDC_PID" || st=$?; CDC_PID=""
cat "$WORK/offsets.json"; echo
if [ "$st" -ne 0 ]; then
  echo "demo: mongocdc exited with status $st (expected 0 after SIGTERM); log: $WORK/mongocdc.log" >&2
  exit 1
fi
say "exit status of mongocdc: 0"
