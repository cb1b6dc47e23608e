#!/usr/bin/env bash
# ctest fixture of the integration tests (tests/integration/CMakeLists.txt):
# `start` before them, `stop` after them. The suite runs as several pytest
# processes at once; each would otherwise start scripts/kafka-local.sh itself
# and the first to finish would stop the broker under the others.
#
# With MCDC_TEST_KAFKA set (an address, or "mock") there is nothing to do.
# Otherwise `start` starts the local broker in $KAFKA_LOCAL_DIR (default
# <build>/kafka-local) unless it already runs, and leaves a mark so that `stop`
# stops only a broker it started; the pytest processes then find it running
# and use it. A failed start is not an error here: the suite's own fixture
# reports it and falls back to the mock cluster, loudly.
#
#   ctest_broker.sh start|stop <build dir>
set -u
action=$1
build=$2
[ -n "${MCDC_TEST_KAFKA:-}" ] && exit 0
here=$(cd "$(dirname "$0")" && pwd)
kl="$here/../../scripts/kafka-local.sh"
export KAFKA_LOCAL_DIR=${KAFKA_LOCAL_DIR:-$build/kafka-local}
mark="$build/ctest-broker-started"
case "$action" in
  start)
    rm -f "$mark"
    if "$kl" status >/dev/null 2>&1; then
      echo "ctest_broker: the local broker already runs; it is left running afterwards"
      exit 0
    fi
    if "$kl" start; then
      touch "$mark"
    else
      echo "ctest_broker: the local broker did not start; the suite falls back to the mock cluster"
    fi
    ;;
  stop)
    if [ -f "$mark" ]; then
      rm -f "$mark"
      "$kl" stop
    fi
    ;;
  *) echo "usage: ctest_broker.sh start|stop <build dir>" >&2; exit 2 ;;
esac
exit 0
