#!/usr/bin/env bash
# Installs every package mongocdc needs to build, test and run (Debian bookworm).
# Idempotent: installs only what is missing and prints what it installed.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git
  libmongoc-dev libbson-dev librdkafka-dev libyaml-dev libev-dev libpcre2-dev
  libutf8proc-dev libcmocka-dev clang-format
  python3 python3-pytest python3-mockupdb python3-pymongo python3-confluent-kafka
  kcat default-jre-headless maven valgrind curl
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: installed ${missing[*]}"
