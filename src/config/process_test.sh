#!/bin/sh
# Process life of the mongocdc binary (src/main.c): exit codes, SIGTERM clean
# stop, a second signal forcing exit 1, SIGHUP reopening the log file.
# Usage: process_test.sh MONGOCDC WORKDIR
# The daemon points at a closed local port, so no MongoDB is needed: it stays
# up retrying until it is told to stop. Every wait is bounded.
set -u
BIN=$1
DIR=$2
rm -rf "$DIR" && mkdir -p "$DIR" || exit 1
cd "$DIR" || exit 1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# Waits (at most $2 tenths of a second) for the text $1 in file $3.
wait_for() {
  n=0
  while ! grep -q -- "$1" "$3" 2>/dev/null; do
    n=$((n + 1)); [ "$n" -gt "$2" ] && return 1; sleep 0.1
  done
  return 0
}
# Waits (at most 15 s) for pid $1; sets rc to its exit code or "timeout".
# Not in a subshell: only the parent can reap its child (and a zombie still
# answers kill -0, so the state is read with ps).
wait_exit() {
  n=0
  while :; do
    state=$(ps -o stat= -p "$1" 2>/dev/null)
    case "$state" in ""|Z*) wait "$1"; rc=$?; return ;; esac
    n=$((n + 1))
    if [ "$n" -gt 150 ]; then kill -KILL "$1"; wait "$1"; rc=timeout; return; fi
    sleep 0.1
  done
}

cat > run.yaml <<'YAML'
topic.prefix: t
mongodb.connection.string: "mongodb://u:Pa55word@127.0.0.1:1/?replicaSet=rs0&serverSelectionTimeoutMS=500"
sink: {type: file, path: events.jsonl}
offsets: {file.path: offsets.json, flush.interval.ms: 100}
connect.backoff.initial.delay.ms: 100
connect.backoff.max.delay.ms: 200
cursor.max.await.time.ms: 200
log: {level: info, file: daemon.log}
YAML

"$BIN" --version >/dev/null; [ $? -eq 0 ] || fail "--version exit code"
"$BIN" --help >/dev/null; [ $? -eq 0 ] || fail "--help exit code"
"$BIN" --no-such-flag 2>/dev/null; [ $? -eq 2 ] || fail "unknown flag must exit 2"
"$BIN" 2>/dev/null; [ $? -eq 2 ] || fail "no -c must exit 2"
"$BIN" --validate -c missing.yaml 2>/dev/null; [ $? -eq 2 ] || fail "missing file must exit 2"
"$BIN" -c missing.yaml 2>/dev/null; [ $? -eq 2 ] || fail "daemon with a missing file must exit 2"
"$BIN" --validate -c run.yaml >/dev/null; [ $? -eq 0 ] || fail "run.yaml must validate"
# -c twice is ambiguous: a usage error, not the last one silently.
"$BIN" --validate -c run.yaml -c run.yaml >/dev/null 2>twice.err
[ $? -eq 2 ] || fail "-c twice must exit 2"
grep -q "^mongocdc: -c given twice" twice.err || fail "-c twice: no message"
grep -q "^usage:" twice.err || fail "-c twice: no usage"
"$BIN" --validate --config=run.yaml -c run.yaml >/dev/null 2>&1
[ $? -eq 2 ] || fail "--config= and -c must exit 2"
# --validate without a file says what is missing, then the usage.
"$BIN" --validate 2>nofile.err; [ $? -eq 2 ] || fail "--validate alone must exit 2"
head -n 1 nofile.err | grep -qx "mongocdc: --validate needs -c FILE" ||
  fail "--validate alone: first line is not the reason"
grep -q "^usage:" nofile.err || fail "--validate alone: no usage"

# SIGTERM: clean stop, exit 0; the password never reaches the log.
"$BIN" -c run.yaml 2>stderr1.log &
pid=$!
wait_for "starting" 50 daemon.log || fail "no start line"
sleep 1
kill -TERM "$pid"
wait_exit "$pid"
[ "$rc" = 0 ] || fail "SIGTERM: exit $rc, expected 0"
grep -q "signal 15: stopping" daemon.log || fail "SIGTERM not logged"
grep -q "Pa55word" daemon.log stderr1.log && fail "password in the log"

# SIGHUP reopens the log file (after rotation), then two signals force exit 1.
mv daemon.log daemon.log.1
"$BIN" -c run.yaml 2>stderr2.log &
pid=$!
wait_for "starting" 50 daemon.log || fail "no start line (2)"
sleep 1
mv daemon.log daemon.log.2
kill -HUP "$pid"
wait_for "log file reopened" 50 daemon.log || fail "SIGHUP did not reopen the log file"
kill -TERM "$pid"
kill -INT "$pid"
wait_exit "$pid"
[ "$rc" = 1 ] || fail "second signal: exit $rc, expected 1"
grep -q "again: exiting now" daemon.log || fail "forced exit not logged"

[ "$fails" -eq 0 ] && echo "process life: all checks passed"
exit "$fails"
