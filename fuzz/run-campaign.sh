#!/usr/bin/env bash
# A longer fuzzing campaign: each target for at least RUNS executions (and
# at most SECONDS), one job at a time, from its seeds plus what earlier
# campaigns kept in WORK/corpus-<target>. Prints libFuzzer's final stats
# and fails on any crash, leak, sanitizer report, timeout or OOM.
#   fuzz/run-campaign.sh BUILD_DIR WORK [RUNS] [SECONDS]
set -euo pipefail
build=$1 work=$2 runs=${3:-1000000} seconds=${4:-1800}
here=$(cd "$(dirname "$0")" && pwd)
export TQ_FUZZ_KERNELS=${TQ_FUZZ_KERNELS:-$build/unittests/Runtime/kernels-plain/libtqkernels.so}
export TQ_FUZZ_GGML_PACK=${TQ_FUZZ_GGML_PACK:-$build/unittests/Runtime/ggml-pack/libtq_ggml_kernels.so}
for target in quant-decode runtime ggml-bridge tq-opt; do
  mkdir -p "$work/corpus-$target" "$work/artifacts-$target"
  echo "== tq-fuzz-$target"
  "$build/bin/tq-fuzz-$target" -runs="$runs" -max_total_time="$seconds" \
    -timeout=20 -rss_limit_mb=4096 -max_len=8192 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts-$target/" \
    "$work/corpus-$target" "$here/corpus/$target" 2>&1 |
    grep -E '^(stat::|Done|INFO: (Seed|Loaded))|ERROR|SUMMARY'
  if compgen -G "$work/artifacts-$target/*" > /dev/null; then
    echo "tq-fuzz-$target left artifacts in $work/artifacts-$target" >&2
    exit 1
  fi
done
