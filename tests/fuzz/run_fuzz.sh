#!/bin/sh
# run_fuzz.sh FUZZER SEED_DIR WORK_DIR SECONDS
# Replays every seed and regression input, then fuzzes for SECONDS from a
# scratch corpus (WORK_DIR, seeded from SEED_DIR). Exit status is the
# fuzzer's: non-zero on a crash, leak or sanitizer report; the crashing input
# is left in WORK_DIR as crash-* to be added to SEED_DIR as a regression.
set -eu
fuzzer=$1 seeds=$2 work=$3 secs=$4
mkdir -p "$work/corpus"
cp -n "$seeds"/* "$work/corpus/" 2>/dev/null || true
"$fuzzer" -runs=0 "$seeds"
exec "$fuzzer" -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=1024 \
  -artifact_prefix="$work/" -print_final_stats=1 "$work/corpus"
