#!/usr/bin/env bash
# Runs a fuzz target over its seed corpus and then for SECONDS more on new
# inputs (in a scratch corpus, so the repository's seeds stay as they are).
# Fails on any crash, leak, sanitizer report or timeout.
#   run-brief.sh TARGET SEEDS WORK SECONDS
set -euo pipefail
target=$1 seeds=$2 work=$3 seconds=$4
rm -rf "$work" && mkdir -p "$work/corpus" "$work/artifacts"
"$target" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 \
  -max_len=8192 -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
  "$work/corpus" "$seeds" 2>&1 | tail -25
