#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs what is missing, builds a
# normal and an ASan+UBSan tree, starts a local Kafka broker when Java is
# present (else the tests use librdkafka's mock cluster and say so), runs ctest
# in both trees (cmocka unit tests + the pytest integration suite), and exits
# non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
JOBS=${JOBS:-$(nproc)}

scripts/install-deps.sh || exit 1

build() { # dir, extra cmake args...
  local dir=$1; shift
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMCDC_WERROR=ON "$@" >"$dir.cmake.log" 2>&1 \
    || { cat "$dir.cmake.log"; return 1; }
  cmake --build "$dir" -j "$JOBS" 2>&1 | grep -vE '^\[ *[0-9]+%\]' || true
  [ "${PIPESTATUS[0]}" -eq 0 ]
}

mkdir -p build build-asan
build build || { echo "test.sh: build failed"; exit 1; }
build build-asan -DMCDC_SANITIZE=address,undefined || { echo "test.sh: ASan build failed"; exit 1; }

# A real Kafka broker for the integration tests, when we can have one.
KAFKA_STARTED=0
if [ -z "${MCDC_TEST_KAFKA:-}" ] && [ -x scripts/kafka-local.sh ]; then
  if out=$(scripts/kafka-local.sh start 2>&1); then
    export MCDC_TEST_KAFKA=$(printf '%s\n' "$out" | tail -n 1)
    KAFKA_STARTED=1
    echo "test.sh: using local Kafka broker at $MCDC_TEST_KAFKA"
  else
    printf '%s\n' "$out" | tail -n 5
    export MCDC_TEST_KAFKA=mock
    echo "test.sh: NO REAL KAFKA: falling back to librdkafka's mock cluster"
  fi
fi
cleanup() { if [ "$KAFKA_STARTED" = 1 ]; then scripts/kafka-local.sh stop >/dev/null 2>&1 || true; fi; }
trap cleanup EXIT

rc=0
echo "== ctest (normal build)"
(cd build && ctest --output-on-failure -j "$JOBS") || rc=1
echo "== ctest (ASan+UBSan build)"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
   UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j "$JOBS") || rc=1

if [ $rc -ne 0 ]; then echo "test.sh: FAILED"; else echo "test.sh: all tests passed"; fi
exit $rc
