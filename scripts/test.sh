#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs what is missing, builds a
# normal and an ASan+UBSan tree, starts a local Kafka broker when Java is
# present (else the tests use librdkafka's mock cluster and say so), runs ctest
# in both trees, and exits non-zero on any failure.
#
#   normal tree     every test: cmocka unit tests (label unit) and the pytest
#                   integration suite (label integration)
#   ASan+UBSan tree the unit tests; MCDC_ASAN_INTEGRATION=1 adds the
#                   integration suite (it roughly doubles the run time)
#   fuzz tree       (clang, MCDC_FUZZ) a short run of each libFuzzer target,
#                   label fuzz, MCDC_FUZZ_SECONDS each (default 15)
#   platform check  scripts/test-platforms.sh: the other Debian release (12 or
#                   13) in a debootstrap root (install-deps, -Werror builds with
#                   gcc and clang, unit tests, demo) and the .deb installed and
#                   run in a clean root of both releases. It runs in the
#                   background at low priority (nice 10) while the ctest runs
#                   below go on, its output in <build>/platform-check.log, and
#                   its summary is printed at the end.
#
# Environment: MCDC_TEST_KAFKA (a broker address, or "mock") skips starting the
# local broker; MONGO_TEST_URI is passed on to the integration suite;
# JOBS sets build and ctest parallelism (default: number of cores; the normal
# tree's ctest runs CTEST_JOBS, default JOBS + 1, at once);
# MCDC_TEST_BUILD_DIR and MCDC_TEST_ASAN_BUILD_DIR name the two build trees
# (default build and build-asan).
set -uo pipefail
# libmongoc may still create its /dev/shm counters before main() turns them
# off (automatic init), and a SIGKILLed daemon leaves its file behind: a later
# process with the same pid then warns on stderr, which the exact-message
# config checks would see. Nothing in the suite reads those counters.
export MONGOC_DISABLE_SHM=1
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
B=${MCDC_TEST_BUILD_DIR:-build}
BA=${MCDC_TEST_ASAN_BUILD_DIR:-build-asan}
BF=${MCDC_TEST_FUZZ_BUILD_DIR:-build-fuzz}
T0=$SECONDS

scripts/install-deps.sh || { echo "test.sh: installing dependencies failed"; exit 1; }

build() { # dir, extra cmake args...
  local dir=$1; shift
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMCDC_WERROR=ON "$@" >"$dir.cmake.log" 2>&1 \
    || { cat "$dir.cmake.log"; return 1; }
  local st
  cmake --build "$dir" -j "$JOBS" 2>&1 | grep -vE '^\[ *[0-9]+%\]'
  st=${PIPESTATUS[0]}
  [ "$st" -eq 0 ]
}

mkdir -p "$B" "$BA"
echo "== build (normal, $B)"
build "$B" || { echo "test.sh: build failed"; exit 1; }
echo "== build (ASan+UBSan, $BA)"
# A failed sanitizer build fails the run, but the normal tree's tests still
# run so the log shows everything that is wrong at once.
ASAN_BUILT=1
build "$BA" -DMCDC_SANITIZE=address,undefined || { echo "test.sh: ASan build FAILED"; ASAN_BUILT=0; }

echo "== build (libFuzzer targets, clang, $BF)"
# Warnings are errors here too (clang's set differs from gcc's).
FUZZ_BUILT=1
mkdir -p "$BF"
build "$BF" -DCMAKE_C_COMPILER=clang -DMCDC_FUZZ=ON -DMCDC_WERROR=ON \
  -DMCDC_FUZZ_SECONDS="${MCDC_FUZZ_SECONDS:-15}" || { echo "test.sh: fuzz build FAILED"; FUZZ_BUILT=0; }

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# A real Kafka broker for the integration tests, when we can have one. Stopped
# at exit only if this run started it. Without KAFKA_PORT, the first free pair
# of ports from 19092 up, so a broker of another checkout does not get in the way.
KAFKA_STARTED=0
if [ -z "${MCDC_TEST_KAFKA:-}" ]; then
  export KAFKA_LOCAL_DIR=${KAFKA_LOCAL_DIR:-$PWD/$B/kafka-local}
  if ! scripts/kafka-local.sh status >/dev/null 2>&1; then
    KAFKA_STARTED=1
    if [ -z "${KAFKA_PORT:-}" ]; then
      for p in 19092 19094 19096 19098 19100 19102 19104 19106; do
        if port_free "$p" && port_free $((p + 1)); then export KAFKA_PORT=$p; break; fi
      done
    fi
  fi
  echo "== starting the local Kafka broker (scripts/kafka-local.sh)"
  if out=$(scripts/kafka-local.sh start 2>&1); then
    export MCDC_TEST_KAFKA=$(printf '%s\n' "$out" | tail -n 1)
    printf '%s\n' "$out" | grep -v "^$MCDC_TEST_KAFKA\$" | tail -n 3
    echo "test.sh: using a real Kafka broker at $MCDC_TEST_KAFKA"
  else
    KAFKA_STARTED=0
    printf '%s\n' "$out" | tail -n 5
    export MCDC_TEST_KAFKA=mock
    echo "test.sh: NO REAL KAFKA: falling back to librdkafka's mock cluster"
  fi
fi
# The Kafka-facing tests (sink, offsets topic, outage, restart, metrics and
# preflight against Kafka) run a second time against the other broker line:
# KAFKA_OTHER_VERSION (default 3.9.1, the 3.x line) when the first broker is
# 4.x (kafka-local.sh's default), else 4.4.0. KAFKA_VERSION names the first
# broker's version, also when MCDC_TEST_KAFKA points at one already running;
# MCDC_TEST_KAFKA_OTHER (an address) uses a second broker already running
# instead of starting one.
KAFKA_FACING=(tests/integration/test_sink_kafka.py tests/integration/test_kafka_local.py
              tests/integration/test_faults.py tests/integration/test_metrics.py
              tests/integration/test_check.py tests/integration/test_exactly_once.py)
KAFKA_FACING_K="kafka or broker or delivery or too_large or metrics_during or good_setup"
KAFKA_FACING_K="$KAFKA_FACING_K or (exactly_once and not sharded and not sigkill and not timed_out)"
OTHER_STARTED=0
OTHER_DIR=$PWD/$B/kafka-local-other
PLATFORM_PID=""
OTHER_PID=""
cleanup() {
  if [ -n "$PLATFORM_PID" ] && kill -0 "$PLATFORM_PID" 2>/dev/null; then
    kill -TERM "$PLATFORM_PID" 2>/dev/null; wait "$PLATFORM_PID" 2>/dev/null
  fi
  if [ -n "$OTHER_PID" ] && kill -0 "$OTHER_PID" 2>/dev/null; then
    kill -TERM "$OTHER_PID" 2>/dev/null; wait "$OTHER_PID" 2>/dev/null
  fi
  if [ "$KAFKA_STARTED" = 1 ]; then scripts/kafka-local.sh stop >/dev/null 2>&1 || true; fi
  if [ "$OTHER_STARTED" = 1 ]; then
    KAFKA_LOCAL_DIR=$OTHER_DIR scripts/kafka-local.sh stop >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PASSED=0
FAILED=0
# Runs ctest in a tree; adds its counts to PASSED/FAILED ("N tests failed out
# of M" is ctest's own summary line).
run_ctest() { # name dir ctest-args...
  local name=$1 dir=$2 log rc summary
  shift 2
  log="$dir/ctest.log"
  echo "== ctest ($name)"
  (cd "$dir" && ctest --output-on-failure --timeout 600 -j "${CTEST_JOBS:-$JOBS}" "$@") 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  summary=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1)
  if [[ "$summary" =~ ([0-9]+)\ tests?\ failed\ out\ of\ ([0-9]+) ]]; then
    FAILED=$((FAILED + BASH_REMATCH[1]))
    PASSED=$((PASSED + BASH_REMATCH[2] - BASH_REMATCH[1]))
  elif [ "$rc" -ne 0 ]; then
    FAILED=$((FAILED + 1))
  fi
  if [ "$rc" -ne 0 ]; then return 1; fi
  grep -qE 'out of [1-9]' "$log" || { echo "test.sh: ctest ($name) ran no test"; return 1; }
}

# pytest's own counts, summed over the JUnit files the integration tests
# write (the suite runs as several ctest tests at once).
pytest_counts() { # junit-file...
  local f have=()
  for f in "$@"; do [ -f "$f" ] && have+=("$f"); done
  [ "${#have[@]}" -gt 0 ] || return 0
  /usr/bin/python3 - "${have[@]}" <<'EOF'
import sys, xml.etree.ElementTree as ET
t = f = e = k = 0
for path in sys.argv[1:]:
    r = ET.parse(path).getroot()
    for s in ([r] if r.tag == "testsuite" else r.findall("testsuite")):
        t += int(s.get("tests", 0)); f += int(s.get("failures", 0))
        e += int(s.get("errors", 0)); k += int(s.get("skipped", 0))
print("integration (pytest): %d passed, %d failed, %d skipped" % (t - f - e - k, f + e, k))
EOF
}

rc=0
rm -f "$B"/integration-junit*.xml "$BA"/integration-junit*.xml "$B/kafka-other-junit.xml"
# The platform check, alongside the ctest runs: most of the integration
# suite's time is waiting, which the check's builds use; at nice 10 it yields
# the CPU whenever the suite wants it. Its host package comes from $B.
echo "== platform check (scripts/test-platforms.sh) started in the background: $B/platform-check.log"
B_ABS=$(cd "$B" && pwd)
MCDC_PLATFORM_HOST_BUILD=$B_ABS MCDC_PLATFORM_BUILD=$B_ABS/platform JOBS=$JOBS \
  nice -n 10 scripts/test-platforms.sh >"$B/platform-check.log" 2>&1 &
PLATFORM_PID=$!
# One more ctest job than cores: the two halves of the integration suite and
# the Debezium tests spend most of their time waiting.
CTEST_JOBS=${CTEST_JOBS:-$((JOBS + 1))} run_ctest "normal build" "$B" || rc=1
if [ "$MCDC_TEST_KAFKA" != mock ]; then
  first=${KAFKA_VERSION:-4.4.0}
  other=${KAFKA_OTHER_VERSION:-$([ "${first%%.*}" -ge 4 ] && echo 3.9.1 || echo 4.4.0)}
  other_bootstrap=${MCDC_TEST_KAFKA_OTHER:-}
  if [ -z "$other_bootstrap" ]; then
    for p in 19292 19294 19296 19298 19300 19302; do
      if port_free "$p" && port_free $((p + 1)); then break; fi
    done
    echo "== starting a Kafka $other broker for the Kafka-facing tests"
    if out=$(KAFKA_VERSION=$other KAFKA_PORT=$p KAFKA_LOCAL_DIR=$OTHER_DIR scripts/kafka-local.sh start 2>&1); then
      OTHER_STARTED=1
      other_bootstrap=$(printf '%s\n' "$out" | tail -n 1)
    else
      printf '%s\n' "$out" | tail -n 5
      echo "test.sh: cannot start Kafka $other: the Kafka-facing tests ran on one broker line only"
      rc=1
      FAILED=$((FAILED + 1))
    fi
  fi
  if [ -n "$other_bootstrap" ]; then
    # In the background, beside the sanitizer and fuzz runs below: most of
    # its time is waiting on the broker and the daemons. Its output is
    # printed when it ends.
    echo "== Kafka-facing tests against Kafka $other at $other_bootstrap (in the background: $B/kafka-other.log)"
    (MCDC_TEST_KAFKA=$other_bootstrap KAFKA_LOCAL_DIR=$OTHER_DIR MCDC_BIN=$PWD/$B/mongocdc \
        MCDC_BUILD_DIR=$PWD/$B MCDC_SOURCE_DIR=$PWD PYTHONDONTWRITEBYTECODE=1 \
        /usr/bin/python3 -m pytest -q -rs -p no:cacheprovider -k "$KAFKA_FACING_K" \
        --junitxml="$B/kafka-other-junit.xml" "${KAFKA_FACING[@]}") >"$B/kafka-other.log" 2>&1 &
    OTHER_PID=$!
  fi
fi
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
if [ "$ASAN_BUILT" = 0 ]; then
  echo "== ctest (ASan+UBSan build): not run, the build failed"
  rc=1
  FAILED=$((FAILED + 1))
elif [ "${MCDC_ASAN_INTEGRATION:-0}" = 1 ]; then
  run_ctest "ASan+UBSan build" "$BA" || rc=1
else
  # unit, config and process-life tests, and the sanitized end-to-end subset
  run_ctest "ASan+UBSan build, all but the full integration suite" "$BA" -LE '^integration$' || rc=1
fi

if [ "$FUZZ_BUILT" = 0 ]; then
  echo "== ctest (fuzz): not run, the build failed"
  rc=1
  FAILED=$((FAILED + 1))
else
  run_ctest "fuzz targets, short runs" "$BF" -L '^fuzz$' || rc=1
fi

if [ -n "$OTHER_PID" ]; then
  echo "== Kafka-facing tests against Kafka $other (waiting for them to finish)"
  other_rc=0
  wait "$OTHER_PID" || other_rc=$?
  OTHER_PID=""
  cat "$B/kafka-other.log"
  if [ "$other_rc" -eq 0 ]; then
    PASSED=$((PASSED + 1))
  else
    rc=1
    FAILED=$((FAILED + 1))
  fi
fi

echo "== platform check (waiting for it to finish)"
platform_rc=0
wait "$PLATFORM_PID" || platform_rc=$?
PLATFORM_PID=""
sed -n '/^== platform check summary/,$p' "$B/platform-check.log"
if [ "$platform_rc" -ne 0 ]; then
  grep -q '^== platform check summary' "$B/platform-check.log" || tail -n 30 "$B/platform-check.log"
  rc=1
  FAILED=$((FAILED + 1))
  PLATFORM_LINE="platform check: FAILED (exit $platform_rc; $B/platform-check.log)"
else
  PASSED=$((PASSED + 1))
  PLATFORM_LINE="platform check: $(grep '^test-platforms:' "$B/platform-check.log" | tail -n 1)"
fi

echo "== summary"
echo "Kafka: ${MCDC_TEST_KAFKA:-unset}   MongoDB: ${MONGO_TEST_URI:-simulator}   time: $((SECONDS - T0))s"
pytest_counts "$B"/integration-junit*.xml
if [ -f "$B/kafka-other-junit.xml" ]; then
  printf 'Kafka-facing tests on Kafka %s: ' "$other"; pytest_counts "$B/kafka-other-junit.xml"
fi
if [ "${MCDC_ASAN_INTEGRATION:-0}" = 1 ]; then pytest_counts "$BA"/integration-junit*.xml; fi
echo "$PLATFORM_LINE"
if [ $rc -ne 0 ]; then
  echo "test.sh: FAILED"
  [ "$FAILED" -eq 0 ] && FAILED=1
else
  echo "test.sh: all tests passed"
fi
echo "ctest: $PASSED passed, $FAILED failed"
exit $rc
