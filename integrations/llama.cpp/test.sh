#!/usr/bin/env bash
# The llama.cpp integration's tests, one subcommand per ctest entry (label
# `llama`, registered by integrations/llama.cpp/CMakeLists.txt; see
# docs/llama.cpp.md, "Tests"):
#
#   test.sh pack NAME              build test kernel pack NAME (a fixture)
#   test.sh fa PACK FA-CHECK-ARGS  fa-check over pack PACK
#   test.sh rows D                 SET_ROWS bytes == tq-quant encode, every
#                                  tqc format, head dim D
#   test.sh ppl-f16                perplexity with an f16 cache (a fixture:
#                                  writes the value the others compare to)
#   test.sh ppl K V MAX_RATIO      perplexity with a K/V cache: finite, and
#                                  within [0.95, MAX_RATIO] x the f16 value
#   test.sh fa-off K V             -fa off with a tqc cache fails, naming why
#   test.sh state                  state save/restore round trip (state-check)
#   test.sh layer-types            TQ_K/V_LAYER_TYPES: listed layers get their
#                                  type (the log says so), a malformed list
#                                  stops the context naming the problem
#   test.sh build-refusals         build.sh refuses an unknown TQ_GGML_DOT
#                                  or TQ_GGML_AMX, or a missing
#                                  TQ_GGML_TUNING_DB,
#                                  bench-ggml/build.sh a llama.cpp build
#                                  directory without position-independent
#                                  code, each naming the cause, before any
#                                  work (needs no llama.cpp build)
#   test.sh capture                tq-capture-kv writes post-RoPE K/V rows of
#                                  chosen layers to .npy; python -m
#                                  tqc.quality --rows measures them (needs
#                                  the venv the ctest `python` builds)
#
# Exit status 77 (ctest: skipped) with a "SKIP:" line naming what is missing
# when the integration is not built (integrations/llama.cpp/build.sh) or the
# model/corpus are not fetched (fetch-model.sh, fetch-corpus.sh).
#
# Environment: TQC_BUILD_DIR (tqc's build; ctest sets it), TQC_LLAMA_DIR
# (default $TQC_BUILD_DIR/llama.cpp, as build.sh), TQC_SKIP_LLAMA=1 (every
# test skips). Outputs go to the current directory (ctest:
# build/integrations/llama.cpp).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${TQC_BUILD_DIR:-$root/build}"
base="${TQC_LLAMA_DIR:-$build/llama.cpp}"
bin="$base/bin"
tq_aot="$build/bin/tq-aot"
tq_quant="$build/bin/tq-quant"
model="$build/models/gemma3-270m-q4_k_m.gguf"
corpus="$build/corpus/english.txt"
packs="$PWD/packs"
chunks=4
threads=2

skip() {
  echo "SKIP: $*"
  exit 77
}
fail() {
  echo "FAIL: $*"
  exit 1
}
# need FILE WHAT: skip unless FILE exists.
need() {
  [[ -e "$1" ]] || skip "$1 is missing ($2)"
}
need_bin() {
  need "$bin/$1" "run integrations/llama.cpp/build.sh, which scripts/test.sh skips when TQC_SKIP_LLAMA=1"
}
need_model() {
  need "$model" "run integrations/llama.cpp/fetch-model.sh"
  need "$corpus" "run integrations/llama.cpp/fetch-corpus.sh"
}

# tqc types of the patched ggml that tq-quant also knows (rows-check list
# prints the former).
tqc_formats() {
  local ours theirs
  ours="$("$bin/rows-check" list)"
  theirs="$("$tq_quant" formats | awk 'NR > 2 {print $1}')"
  for f in $ours; do
    grep -qx "$f" <<< "$theirs" && echo "$f"
  done
}

# Test packs: tq-aot arguments per name.
pack_args() {
  case "$1" in
    fa-dots) # the fast dot paths (what build.sh's default pack takes)
      echo "--pairs=turbo3_0:turbo3_0,polar4:polar4,turbo4_0:turbo4_0 --head-dim=128,256 --gqa=1,4 --score-dot=auto --value-dot=auto --amx=auto" ;;
    fa-d*)  # turbo3_0 over every GQA group at one head dim
      echo "--pairs=turbo3_0:turbo3_0 --head-dim=${1#fa-d} --gqa=1,2,4,7,8" ;;
    fa-mla) # DeepSeek's K 576 / V 512 (groups above 2 compile slowly at 576)
      echo "--pairs=turbo3_0:turbo4_0 --head-dim=576 --v-head-dim=512 --gqa=1,2" ;;
    fa-asym)
      echo "--pairs=q8_0:turbo3_0,turbo3_0:f16,turbo3_0:q8_0,turbo4_0:polar4 --head-dim=128 --gqa=4" ;;
    fa-softcap)
      echo "--pairs=turbo3_0:turbo3_0 --head-dim=128 --gqa=2 --softcap=50" ;;
    rows)   # row kernels of every format; attention against f16 V, group 1
      local pairs
      pairs="$(tqc_formats | sed 's/$/:f16/' | paste -sd,)"
      echo "--pairs=$pairs --head-dim=128,256 --gqa=1" ;;
    *) echo "test.sh: unknown pack $1" >&2; exit 2 ;;
  esac
}

cmd="${1:-}"
shift || true
if [[ "${TQC_SKIP_LLAMA:-0}" == 1 ]]; then
  skip "TQC_SKIP_LLAMA=1"
fi
case "$cmd" in
  pack)
    name="$1"
    need_bin fa-check
    need_bin rows-check
    need "$tq_aot" "build tqc first"
    dir="$packs/$name"
    # shellcheck disable=SC2207
    args=($(pack_args "$name"))
    stamp="$(printf '%s\n' "${args[*]}"; sha256sum "$tq_aot" | cut -d' ' -f1)"
    if [[ -f "$dir/libtq_ggml_kernels.so" && "$(cat "$dir/.tqc-stamp" 2>/dev/null)" == "$stamp" ]]; then
      echo "pack $name up to date at $dir"
      exit 0
    fi
    rm -rf "$dir"
    mkdir -p "$dir"
    echo "tq-aot --abi=ggml ${args[*]} -o $dir"
    start=$SECONDS
    "$tq_aot" --quiet --abi=ggml "${args[@]}" -o "$dir"
    echo "$stamp" > "$dir/.tqc-stamp"
    echo "pack $name built in $((SECONDS - start)) s"
    ;;

  fa)
    pack="$1"
    shift
    need_bin fa-check
    need "$packs/$pack/libtq_ggml_kernels.so" "the llama-pack-$pack test builds it"
    amx_kernels="$(nm -D "$packs/$pack/libtq_ggml_kernels.so" | grep -c '_uses_amx$' || true)"
    echo "pack $pack: $amx_kernels kernels with AMX tiles"
    TQ_GGML_PACK="$packs/$pack/libtq_ggml_kernels.so" "$bin/fa-check" "$@"
    ;;

  rows)
    d="$1"
    need_bin rows-check
    need "$tq_quant" "build tqc first"
    need "$packs/rows/libtq_ggml_kernels.so" "the llama-pack-rows test builds it"
    export TQ_GGML_PACK="$packs/rows/libtq_ggml_kernels.so"
    work="$PWD/rows-d$d"
    rm -rf "$work"
    mkdir -p "$work"
    "$bin/rows-check" gen "$d" 64 "$d" "$work/in.f32"
    failed=0 n=0
    for f in $(tqc_formats); do
      n=$((n + 1))
      "$tq_quant" encode --format "$f" --dim "$d" "$work/in.f32" "$work/$f.bin"
      "$tq_quant" decode --format "$f" --dim "$d" "$work/$f.bin" "$work/$f.f32"
      "$bin/rows-check" "$f" "$d" "$work/in.f32" "$work/$f.bin" "$work/$f.f32" || failed=$((failed + 1))
    done
    [[ $n -gt 0 ]] || fail "no tqc format is known to both ggml and tq-quant"
    echo "$((n - failed)) of $n formats passed at head dim $d"
    [[ $failed -eq 0 ]]
    ;;

  ppl-f16 | ppl)
    need_bin llama-perplexity
    need_model
    if [[ "$cmd" == ppl-f16 ]]; then
      k=f16 v=f16
    else
      k="$1" v="$2" max_ratio="$3"
      need "$PWD/ppl-f16.value" "the llama-ppl-f16 test writes it"
    fi
    log="$PWD/ppl-$k-$v.log"
    rm -f "$log"
    echo "llama-perplexity -c 512 --chunks $chunks -t $threads -ctk $k -ctv $v (log: $log)"
    status=0
    "$bin/llama-perplexity" -m "$model" -f "$corpus" -c 512 --chunks "$chunks" -t "$threads" \
      -ctk "$k" -ctv "$v" > "$log" 2>&1 || status=$?
    [[ $status -eq 0 ]] || { tail -20 "$log"; fail "llama-perplexity exited with status $status"; }
    grep -oE '^\[[0-9]+\][0-9.naif,\[\]-]*' "$log" | tail -1 || true
    ppl="$(grep -oE 'Final estimate: PPL = [^ ]+' "$log" | awk '{print $5}')"
    [[ -n "$ppl" ]] || { tail -20 "$log"; fail "no final estimate in $log"; }
    awk -v p="$ppl" 'BEGIN { exit !(p == p + 0 && p > 1 && p < 1e6) }' ||
      fail "perplexity $ppl is not finite"
    if [[ "$cmd" == ppl-f16 ]]; then
      # The f16 value of docs/llama.cpp.md (30.61 with 4 chunks); a value
      # outside [20, 45] means the model, corpus or tokenizer changed.
      echo "PPL f16/f16 = $ppl"
      awk -v p="$ppl" 'BEGIN { exit !(p >= 20 && p <= 45) }' ||
        fail "f16 perplexity $ppl is outside [20, 45]"
      echo "$ppl" > "$PWD/ppl-f16.value"
    else
      base_ppl="$(cat "$PWD/ppl-f16.value")"
      ratio="$(awk -v p="$ppl" -v b="$base_ppl" 'BEGIN { printf "%.4f", p / b }')"
      echo "PPL $k/$v = $ppl, f16 = $base_ppl: ratio $ratio (allowed 0.95 .. $max_ratio)"
      awk -v r="$ratio" -v m="$max_ratio" 'BEGIN { exit !(r >= 0.95 && r <= m) }' ||
        fail "$k/$v perplexity $ppl is $ratio x f16's $base_ppl, outside [0.95, $max_ratio]"
    fi
    ;;

  fa-off)
    k="$1" v="$2"
    need_bin llama-perplexity
    need_model
    log="$PWD/fa-off-$k-$v.log"
    status=0
    "$bin/llama-perplexity" -m "$model" -f "$corpus" -c 512 --chunks 1 -t "$threads" \
      -ctk "$k" -ctv "$v" -fa off > "$log" 2>&1 || status=$?
    tq="$k"
    [[ "$k" == f16 || "$k" == q8_0 ]] && tq="$v"
    want="the tqc KV cache type $tq requires flash_attn to be enabled"
    grep -F "$want" "$log" || { tail -20 "$log"; fail "no '$want' in $log"; }
    [[ $status -ne 0 ]] || fail "llama-perplexity -fa off -ctk $k -ctv $v exited with status 0"
    echo "ok: -fa off -ctk $k -ctv $v exits with status $status and says why"
    ;;

  state)
    need_bin state-check
    need_model
    mkdir -p "$PWD/state"
    "$bin/state-check" -m "$model" -f "$corpus" -ctk turbo3_0 -ctv turbo3_0 -n 200 \
      -t "$threads" -o "$PWD/state"
    ;;

  layer-types)
    need_bin llama-perplexity
    need_model
    log="$PWD/layer-types.log"
    # K of layers 5 and 11 in q8_0 and of layer 3 in turbo4_0, the rest
    # turbo3_0, V turbo3_0: pairs q8_0:turbo3_0, turbo4_0:turbo3_0 and
    # turbo3_0:turbo3_0, all in build.sh's default pack.
    status=0
    TQ_K_LAYER_TYPES=5:q8_0,11:q8_0,3:turbo4_0 "$bin/llama-perplexity" -m "$model" -f "$corpus" \
      -c 512 --chunks 1 -t "$threads" -ctk turbo3_0 -ctv turbo3_0 -lv 4 > "$log" 2>&1 || status=$?
    [[ $status -eq 0 ]] || { tail -20 "$log"; fail "llama-perplexity with TQ_K_LAYER_TYPES exited with status $status"; }
    for l in "5: K cache type q8_0" "11: K cache type q8_0" "3: K cache type turbo4_0"; do
      grep -qF "layer $l (TQ_K_LAYER_TYPES)" "$log" || fail "no 'layer $l' in $log"
    done
    grep -E 'Final estimate: PPL = [0-9.]+' "$log" || fail "no final estimate in $log"
    for bad in "5-q8_0" "5:q9_0" "x:q8_0" "5:q2_k"; do
      status=0
      TQ_K_LAYER_TYPES="$bad" "$bin/llama-perplexity" -m "$model" -f "$corpus" -c 512 --chunks 1 \
        -t "$threads" -ctk turbo3_0 -ctv turbo3_0 > "$log.bad" 2>&1 || status=$?
      [[ $status -ne 0 ]] || fail "TQ_K_LAYER_TYPES=$bad was accepted"
      grep -qF "TQ_K_LAYER_TYPES=\"$bad\"" "$log.bad" || { tail -5 "$log.bad"; fail "no message naming TQ_K_LAYER_TYPES=$bad"; }
    done
    echo "ok: per-layer types applied and logged; malformed lists refused with a message"
    ;;

  capture)
    need_bin tq-capture-kv
    need_model
    py="$build/python-test/venv/bin/python"
    [[ -x "$py" ]] && "$py" -c 'import tqc.quality' 2> /dev/null ||
      skip "$py cannot import tqc.quality (the ctest 'python' builds that environment: ctest -R '^python\$')"
    out="$PWD/capture"
    rm -rf "$out"
    mkdir -p "$out"
    status=0
    "$bin/tq-capture-kv" -m "$model" -f "$corpus" -n 96 --layers 0,5 -t "$threads" -o "$out" \
      > "$PWD/capture.log" 2>&1 || status=$?
    [[ $status -eq 0 ]] || { tail -20 "$PWD/capture.log"; fail "tq-capture-kv exited with status $status"; }
    # Gemma 3 270M: 1 KV head of 256, 4 query heads; 96 tokens asked for.
    "$py" - "$out" <<'PY' || fail "the captured rows are not what they should be"
import sys
from pathlib import Path
import numpy as np
out = Path(sys.argv[1])
names = sorted(p.name for p in out.glob("*.npy"))
want = sorted(f"{s}_L{l}.npy" for s in "QKV" for l in (0, 5))
assert names == want, f"files {names}, expected {want}"
rows = {}
for n in want:
    a = np.load(out / n)
    shape = (96, 4 if n[0] == "Q" else 1, 256)
    assert a.dtype == np.float32 and a.shape == shape, f"{n}: {a.dtype} {a.shape}, expected float32 {shape}"
    assert np.isfinite(a).all(), f"{n}: non-finite values"
    assert (np.linalg.norm(a, axis=-1) > 0).all(), f"{n}: a row of zeros"
    rows[n] = a
# Distinct tensors: K and V of a layer, one layer and the other.
assert not np.allclose(rows["K_L0.npy"], rows["V_L0.npy"])
assert not np.allclose(rows["K_L0.npy"], rows["K_L5.npy"])
# Each token its own row (RoPE alone makes K rows of the same text differ).
assert len({r.tobytes() for r in rows["K_L0.npy"][:, 0]}) == 96
print("ok: Q/K/V of layers 0 and 5, [96, heads, 256] float32, finite, distinct")
PY
    "$py" -m tqc.quality --rows "$out/K_L0.npy" "$out/V_L5.npy" --formats turbo3_0,polar4,q8_0 \
      --json "$out/quality.json" || fail "python -m tqc.quality --rows failed"
    "$py" - "$out/quality.json" <<'PY' || fail "tqc.quality's results on the captured rows are wrong"
import json, math, sys
rep = json.load(open(sys.argv[1]))
res = rep["results"]
assert len(res) == 6, len(res)
for r in res:
    assert "error" not in r and r["head_dim"] == 256 and r["rows"] == 96, r
    assert all(math.isfinite(r[m]) for m in ("mse", "cosine", "ip_rel_error", "attn_rel_error")), r
    assert 0 < r["mse"] < 0.2 and r["cosine"] > 0.9, r
mse = {(r["source"].rsplit("/", 1)[-1], r["format"]): r["mse"] for r in res}
for s in ("K_L0.npy", "V_L5.npy"):
    assert mse[(s, "q8_0")] < mse[(s, "polar4")] < mse[(s, "turbo3_0")], mse
print("ok: tqc.quality on the captured rows:", {f"{k[0]}/{k[1]}": round(v, 5) for k, v in mse.items()})
PY
    ;;

  build-refusals)
    out="$(TQ_GGML_DOT=i8 bash "$here/build.sh" 2>&1)" &&
      fail "build.sh accepted TQ_GGML_DOT=i8"
    grep -q "TQ_GGML_DOT must be auto or f32, got 'i8'" <<< "$out" ||
      fail "build.sh's refusal does not name TQ_GGML_DOT: $out"
    echo "ok: build.sh refuses TQ_GGML_DOT=i8"
    out="$(TQ_GGML_AMX=yes bash "$here/build.sh" 2>&1)" &&
      fail "build.sh accepted TQ_GGML_AMX=yes"
    grep -q "TQ_GGML_AMX must be auto, on or off, got 'yes'" <<< "$out" ||
      fail "build.sh's refusal does not name TQ_GGML_AMX: $out"
    echo "ok: build.sh refuses TQ_GGML_AMX=yes"
    out="$(TQ_GGML_TUNING_DB="$PWD/no-such.db" bash "$here/build.sh" 2>&1)" &&
      fail "build.sh accepted a missing TQ_GGML_TUNING_DB"
    grep -q "TQ_GGML_TUNING_DB '$PWD/no-such.db' is not a file" <<< "$out" ||
      fail "build.sh's refusal does not name TQ_GGML_TUNING_DB: $out"
    echo "ok: build.sh refuses a missing TQ_GGML_TUNING_DB"
    need "$build/lib/libtq_runtime.so" "build tqc first"
    # A llama.cpp tree and build directory from before ggml was built
    # position-independent (stand-ins: only the files the script checks).
    old="$PWD/old-llama"
    rm -rf "$old"
    mkdir -p "$old/src" "$old/build"
    touch "$old/src/CMakeLists.txt" "$old/src/.tqc-applied.patch"
    echo "CMAKE_POSITION_INDEPENDENT_CODE:BOOL=OFF" > "$old/build/CMakeCache.txt"
    out="$(TQC_LLAMA_DIR="$old" bash "$here/bench-ggml/build.sh" 2>&1)" &&
      fail "bench-ggml/build.sh accepted a build without position-independent code"
    grep -q "not configured with position-independent code" <<< "$out" ||
      fail "bench-ggml/build.sh's refusal does not name the cause: $out"
    [[ ! -e "$old/lib" ]] || fail "bench-ggml/build.sh wrote $old/lib before refusing"
    echo "ok: bench-ggml/build.sh refuses a build directory without PIC"
    ;;

  *)
    echo "usage: test.sh pack NAME | fa PACK ARGS | rows D | ppl-f16 | ppl K V MAX_RATIO | fa-off K V | state | layer-types | build-refusals | capture" >&2
    exit 2
    ;;
esac
