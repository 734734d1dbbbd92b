#!/usr/bin/env bash
# ctest llama-tq-bench (label llama): a tiny tq-bench run with the ggml
# baselines (--ggml-bench) and two --variants, checked row by row:
#   - the decode and prefill tables have the floor columns, every fused,
#     variant (a decode-only knob's variant: decode only), f16 baseline and
#     ggml row (f16 and q4_0, contiguous and cache layout), each number of
#     a row positive, and x floor >= x roofline (the floor is the lower
#     bound);
#   - ggml's f16 rows read the bytes of the f16 baseline's cache;
#   - an unknown knob, a bad knob value and a library that is not a ggml
#     bench library stop tq-bench with a message naming them.
# Builds lib/libtq_bench_ggml.so (bench-ggml/build.sh) when the integration
# is built but the library is not; exit status 77 (skipped) with a "SKIP:"
# line when the integration is not built. Outputs go to the current
# directory.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
build="${TQC_BUILD_DIR:-$root/build}"
base="${TQC_LLAMA_DIR:-$build/llama.cpp}"
lib="$base/lib/libtq_bench_ggml.so"
tq_bench="$build/bin/tq-bench"

skip() {
  echo "SKIP: $*"
  exit 77
}
fail() {
  echo "FAIL: $*"
  exit 1
}

[[ "${TQC_SKIP_LLAMA:-0}" == 1 ]] && skip "TQC_SKIP_LLAMA=1"
[[ -x "$tq_bench" ]] || fail "$tq_bench is missing (build tqc first)"
if [[ ! -f "$lib" ]]; then
  [[ -f "$base/src/.tqc-applied.patch" ]] ||
    skip "$base is not built (run integrations/llama.cpp/build.sh, which scripts/test.sh skips when TQC_SKIP_LLAMA=1)"
  echo "building $lib"
  JOBS="${JOBS:-2}" "$here/build.sh"
fi

out="$PWD/tq-bench-ggml.md"
rm -f "$out"
cmd=("$tq_bench" --formats=turbo3_0 --contexts=256 --prefill-rows=4
     --prefill-contexts=64 --repeat=1 --skip-naive --flush-mib=8
     "--variants=t32:tile_size=32;s2:splits=2" "--ggml-bench=$lib"
     --report "$out")
echo "${cmd[*]}"
"${cmd[@]}" > /dev/null
cat "$out"

grep -q "^ggml baselines: ggml's CPU FLASH_ATTN_EXT (.*$lib)" "$out" ||
  fail "the report does not say the ggml baselines are included"
grep -q '^Variants (fused kernels with other knob values, in the same rounds): t32: tile_size=32; s2: splits=2;$' "$out" ||
  fail "the report does not list the variants"

# check_table TITLE COLUMNS KERNEL... : the table after the line matching
# TITLE has COLUMNS columns ending in "floor ms | x floor", and a row of
# each KERNEL whose numbers are all positive, with x floor >= x roofline.
check_table() {
  local title="$1" columns="$2"
  shift 2
  awk -F' *[|] *' -v title="$title" -v columns="$columns" -v kernels="$(printf '%s\n' "$@")" '
    BEGIN { n = split(kernels, want, "\n"); for (i = 1; i <= n; ++i) need[want[i]] = 1 }
    $0 ~ title { after = 1; next }
    after && /^\| format/ {
      after = 0; intable = 1
      # Fields: "" first and last (the outer bars).
      if (NF - 2 != columns) { print "FAIL: " title ": " NF - 2 " columns, not " columns; bad = 1 }
      if ($(NF - 2) != "floor ms" || $(NF - 1) != "x floor") { print "FAIL: " title ": no floor columns"; bad = 1 }
      if ($(NF - 3) != "x roofline") { print "FAIL: " title ": no x roofline column"; bad = 1 }
      next
    }
    intable && /^\|---/ { next }
    intable && /^\| / {
      kernel = $4
      seen[kernel] = 1
      for (i = 5; i <= NF - 1; ++i)
        if (!($i ~ /^[0-9]+([.][0-9]+)?$/ && $i + 0 > 0)) {
          print "FAIL: " title ": " kernel ": column " i - 1 " is \"" $i "\", not a positive number"; bad = 1
        }
      if ($(NF - 1) + 0.05 < $(NF - 3) + 0) {
        print "FAIL: " title ": " kernel ": x floor " $(NF - 1) " < x roofline " $(NF - 3); bad = 1
      }
      if (kernel ~ /^ggml f16/) ggml_f16_mb[kernel] = $7
      if (kernel == "f16 baseline (fused)") f16_mb = $7
      next
    }
    intable && !/^\|/ { intable = 0 }
    END {
      for (k in need) if (!(k in seen)) { print "FAIL: " title ": no row \"" k "\""; bad = 1 }
      for (k in ggml_f16_mb) if (ggml_f16_mb[k] != f16_mb) {
        print "FAIL: " title ": " k " reads " ggml_f16_mb[k] " MB, the f16 baseline " f16_mb; bad = 1
      }
      exit bad
    }' "$out" || fail "table \"$title\""
}
ggml_rows=("ggml f16 (contiguous)" "ggml f16 (cache layout)" "ggml q4_0 (contiguous)" "ggml q4_0 (cache layout)")
check_table "^## Decode" 11 fused "fused (t32)" "fused (s2)" "f16 baseline (fused)" "${ggml_rows[@]}"
check_table "^### Prefill" 10 fused "fused (t32)" "f16 baseline (fused)" "${ggml_rows[@]}"
if awk '/^### Prefill/ { p = 1 } p && /fused \(s2\)/ { found = 1 } END { exit !found }' "$out"; then
  fail "the splits variant has a prefill row (splits is a decode knob)"
fi

# expect_error WHAT ARGS...: tq-bench ARGS fails with a message matching WHAT.
expect_error() {
  local what="$1" msg
  shift
  if msg="$("$tq_bench" "$@" 2>&1)"; then
    fail "tq-bench $* succeeded"
  fi
  grep -q -- "$what" <<< "$msg" || fail "tq-bench $*: no \"$what\" in: $msg"
  echo "ok: tq-bench $* -> $(grep -- "$what" <<< "$msg" | head -1)"
}
expect_error "error: --variants 'x': unknown knob 'no_such_knob' (knobs of these kernels: tile_size" \
  --formats=turbo3_0 --variants=x:no_such_knob=1
expect_error "error: --variants 'x': .*knob tile_size takes integer >= 1, got 'big'" \
  --formats=turbo3_0 --variants=x:tile_size=big
expect_error "error: --ggml-bench: .* has no symbol tqbg_abi_version" \
  "--ggml-bench=$(realpath "$build/lib/libtq_runtime.so")"
echo "PASS"
