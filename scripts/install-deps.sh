#!/usr/bin/env bash
# Installs every Debian (bookworm) package mongocdc needs to build, test and
# run. Idempotent: checks first, runs `apt-get update` and `apt-get install`
# only when something is missing, and prints what it installed. Safe to run
# any number of times; scripts/test.sh runs it first.
#
# REQUIRED packages must all be present or the script exits 1. OPTIONAL ones
# serve the tests that need Java: a JDK 17 and Maven run the real Kafka broker
# from its jars (kcat probes it) and build the Java driver's JSON writer used
# as the encoder's oracle. If they cannot be installed the script warns and
# exits 0: the suite falls back to librdkafka's mock cluster and skips the
# oracle test, saying so.
set -euo pipefail

REQUIRED=(
  # build
  build-essential cmake pkg-config git
  libmongoc-dev libbson-dev librdkafka-dev libyaml-dev libev-dev libpcre2-dev
  libutf8proc-dev libmicrohttpd-dev
  # unit tests, formatting, memory checks
  libcmocka-dev clang-format valgrind
  # libFuzzer targets (MCDC_FUZZ): clang and its sanitizer/fuzzer runtimes,
  # which clang only recommends (not pulled in with --no-install-recommends)
  clang libclang-rt-dev
  # integration tests and the MongoDB simulator
  python3 python3-pytest python3-mockupdb python3-pymongo python3-bson
  python3-confluent-kafka python3-yaml
  # promtool checks the metrics exposition and the alert rules (tests)
  prometheus
  # scripts
  ca-certificates curl procps coreutils
)
OPTIONAL=(kcat)

# One dpkg-query for all packages: the names of those installed.
have=" $(dpkg-query -W -f='${Package} ${Status}\n' "${REQUIRED[@]}" "${OPTIONAL[@]}" 2>/dev/null |
         awk '$NF == "installed" && $(NF-1) == "ok" { print $1 }' | tr '\n' ' ' || true) "
installed() { [[ "$have" == *" $1 "* ]]; }

# A JDK >= 17 and Maven count as present when on PATH, whatever package
# brought them (a newer JDK, a Maven outside apt).
java_ok() {
  command -v java >/dev/null 2>&1 && command -v javac >/dev/null 2>&1 || return 1
  local v
  v=$(javac -version 2>&1 | sed -n 's/^javac \([0-9]*\).*/\1/p' | head -n 1)
  [ -n "$v" ] && [ "$v" -ge 17 ]
}

missing_req=()
missing_opt=()
for p in "${REQUIRED[@]}"; do installed "$p" || missing_req+=("$p"); done
for p in "${OPTIONAL[@]}"; do installed "$p" || missing_opt+=("$p"); done
java_ok || missing_opt+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || missing_opt+=(maven)

total=$(( ${#REQUIRED[@]} + ${#OPTIONAL[@]} + 2 ))
if [ ${#missing_req[@]} -eq 0 ] && [ ${#missing_opt[@]} -eq 0 ]; then
  echo "install-deps: all $total dependencies already installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
APT_INSTALL=($SUDO apt-get install -y -qq --no-install-recommends)

echo "install-deps: missing: ${missing_req[*]} ${missing_opt[*]}"
if ! $SUDO apt-get update -qq; then
  echo "install-deps: apt-get update failed" >&2
fi

rc=0
if [ ${#missing_req[@]} -gt 0 ]; then
  if "${APT_INSTALL[@]}" "${missing_req[@]}" >/dev/null; then
    echo "install-deps: installed ${missing_req[*]}"
  else
    echo "install-deps: FAILED to install required packages: ${missing_req[*]}" >&2
    rc=1
  fi
fi
if [ ${#missing_opt[@]} -gt 0 ]; then
  # One by one: a JRE that cannot be had should not keep kcat away.
  for p in "${missing_opt[@]}"; do
    if "${APT_INSTALL[@]}" "$p" >/dev/null; then
      echo "install-deps: installed $p"
    else
      echo "install-deps: could not install $p: the integration tests will use librdkafka's mock cluster instead of a real Kafka broker, and skip the Java oracle" >&2
    fi
  done
fi
exit $rc
