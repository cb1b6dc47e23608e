#!/usr/bin/env bash
# Installs every Debian package mongocdc needs to build, test, package and run,
# on Debian 12 (bookworm) and Debian 13 (trixie) alike: every name below exists
# in both releases. Idempotent: checks first, runs `apt-get update` and
# `apt-get install` only when something is missing, and prints what it
# installed. Safe to run any number of times; scripts/test.sh runs it first.
#
# REQUIRED packages must all be present or the script exits 1, naming the
# ones it could not install. OPTIONAL ones serve the tests that need Java: a
# JDK >= 17 (whichever the release has: 17 on bookworm, 21 on trixie) and
# Maven run the real Kafka broker from its jars (kcat probes it) and build the
# Java driver's JSON writer used as the encoder's oracle. If they cannot be
# installed the script warns and exits 0: the suite falls back to librdkafka's
# mock cluster and skips the oracle test, saying so.
#
# `scripts/install-deps.sh --build` installs only what building, the unit
# tests and `cpack -G DEB` need (the Docker image's build stage).
#
# Packages go in with one `apt-get install` when it can; if that fails (a
# package the release does not have, a broken mirror entry), each missing
# package is installed on its own, so one that cannot be had is reported by
# name and never keeps the others out.
set -euo pipefail

REQUIRED=(
  # build
  build-essential cmake pkg-config git
  libmongoc-dev libbson-dev librdkafka-dev libyaml-dev libev-dev libpcre2-dev
  libutf8proc-dev libmicrohttpd-dev
  # unit tests, formatting, memory checks
  libcmocka-dev clang-format valgrind
  # clang (the -Werror build with clang and the libFuzzer targets, MCDC_FUZZ)
  # and its sanitizer/fuzzer runtimes, which clang only recommends (not pulled
  # in with --no-install-recommends). libclang-rt-dev is the release's
  # default-version metapackage (libclang-rt-14-dev on bookworm,
  # libclang-rt-19-dev on trixie).
  clang libclang-rt-dev
  # integration tests and the MongoDB simulator
  python3 python3-pytest python3-pymongo python3-bson
  python3-confluent-kafka python3-yaml
  # promtool checks the metrics exposition and the alert rules (tests)
  prometheus
  # the .deb package (cpack -G DEB runs dpkg-shlibdeps, which needs file)
  dpkg-dev file
  # the platform check (scripts/test-platforms.sh): a root of the other
  # Debian release, cached as a zstd tarball
  debootstrap zstd
  # scripts
  ca-certificates curl procps coreutils
)
OPTIONAL=(kcat)
if [ "${1:-}" = --build ]; then
  REQUIRED=(build-essential cmake pkg-config
            libmongoc-dev libbson-dev librdkafka-dev libyaml-dev libev-dev libpcre2-dev
            libutf8proc-dev libmicrohttpd-dev libcmocka-dev dpkg-dev file ca-certificates)
  OPTIONAL=()
elif [ $# -gt 0 ]; then
  echo "usage: scripts/install-deps.sh [--build]" >&2
  exit 2
fi
# JDK candidates, first that installs wins: the release's default JDK, then
# the versions Debian 13 and 12 ship.
JDK_CANDIDATES=(default-jdk-headless openjdk-21-jdk-headless openjdk-17-jdk-headless)

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
need_jdk=0
total=$(( ${#REQUIRED[@]} + ${#OPTIONAL[@]} ))
if [ "${1:-}" != --build ]; then
  java_ok || need_jdk=1
  command -v mvn >/dev/null 2>&1 || missing_opt+=(maven)
  total=$((total + 2))
fi

if [ ${#missing_req[@]} -eq 0 ] && [ ${#missing_opt[@]} -eq 0 ] && [ $need_jdk = 0 ]; then
  echo "install-deps: all $total dependencies already installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "install-deps: not root and no sudo: cannot install ${missing_req[*]} ${missing_opt[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
APT_INSTALL=($SUDO apt-get install -y -qq --no-install-recommends)

echo "install-deps: missing: ${missing_req[*]} ${missing_opt[*]}$([ $need_jdk = 1 ] && echo ' a JDK >= 17')"
if ! $SUDO apt-get update -qq; then
  echo "install-deps: apt-get update failed" >&2
fi

# Installs the given packages, all at once and else one by one; sets FAILED
# to the names that could not be installed. apt's own error goes to stderr.
FAILED=()
install_all() {
  FAILED=()
  [ $# -gt 0 ] || return 0
  if "${APT_INSTALL[@]}" "$@" >/dev/null 2>&1; then
    echo "install-deps: installed $*"
    return 0
  fi
  [ $# -gt 1 ] && echo "install-deps: installing all at once failed; now one by one" >&2
  local p
  for p in "$@"; do
    if "${APT_INSTALL[@]}" "$p" >/dev/null; then
      echo "install-deps: installed $p"
    else
      FAILED+=("$p")
    fi
  done
  [ ${#FAILED[@]} -eq 0 ]
}

rc=0
if ! install_all "${missing_req[@]}"; then
  echo "install-deps: FAILED to install required packages: ${FAILED[*]}" >&2
  rc=1
fi
opt_failed=()
if ! install_all "${missing_opt[@]}"; then opt_failed+=("${FAILED[@]}"); fi
if [ $need_jdk = 1 ]; then
  jdk=""
  for p in "${JDK_CANDIDATES[@]}"; do
    if "${APT_INSTALL[@]}" "$p" >/dev/null 2>&1 && java_ok; then jdk=$p; break; fi
  done
  if [ -n "$jdk" ]; then
    echo "install-deps: installed $jdk ($(javac -version 2>&1 | head -n 1))"
  else
    opt_failed+=("a JDK >= 17 (tried ${JDK_CANDIDATES[*]})")
  fi
fi
if [ ${#opt_failed[@]} -gt 0 ]; then
  echo "install-deps: could not install: ${opt_failed[*]}: the integration tests will use librdkafka's mock cluster instead of a real Kafka broker, and skip the Java oracle" >&2
fi
exit $rc
