#!/usr/bin/env bash
# Quality of KV cache types on a real model: perplexity, its change against
# f16, mean KL divergence against f16 and top-1 agreement, per K/V pair,
# from one f16 run whose logits are the reference (llama-perplexity
# --kl-divergence). A benchmark, not a test: prints a markdown table.
#
#   quality.sh [PAIR ...]        PAIR = K:V, e.g. turbo4_0:turbo3_0; a K
#                                written K+c runs with TQ_K_CENTRES=$CENTRES
#                                (centred K, docs/llama.cpp.md); K or V may
#                                end in @L=T,L=T: layers L get type T
#                                (TQ_K_LAYER_TYPES / TQ_V_LAYER_TYPES), e.g.
#                                polar4+c@5=q8_0,11=q8_0:turbo2_0
#
# Bits per value are the mean over K and V of each layer's type, every
# layer weighted alike (the rate of a cache whose layers hold the same
# tokens; Gemma 3's sliding-window layers hold fewer at long contexts).
#
# Environment:
#   CHUNKS      512-token chunks of the corpus scored (default 40)
#   THREADS     default 2
#   MODEL       default ${TQC_BUILD_DIR:-build}/models/gemma3-270m-q4_k_m.gguf
#   CORPUS      default ${TQC_BUILD_DIR:-build}/corpus/english.txt
#   CENTRES     centres for K+c pairs (tq-capture-kv --centres)
#   LAYERS      layers of the model (default 18, Gemma 3 270M)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${TQC_BUILD_DIR:-$root/build}"
bin="$build/llama.cpp/bin"
model="${MODEL:-$build/models/gemma3-270m-q4_k_m.gguf}"
corpus="${CORPUS:-$build/corpus/english.txt}"
chunks="${CHUNKS:-40}"
threads="${THREADS:-2}"
layers="${LAYERS:-18}"
work="$build/quality"
mkdir -p "$work"

pairs=("$@")
if [[ ${#pairs[@]} -eq 0 ]]; then
  pairs=(f16:f16 q8_0:q8_0 q4_0:q4_0 iq4_nl:iq4_nl
         turbo2_0:turbo2_0 turbo3_0:turbo3_0 turbo4_0:turbo4_0 tq3_0:tq3_0
         polar4:polar4 q8_0:turbo3_0 turbo3_0:q8_0)
fi
for f in "$model" "$corpus" "$bin/llama-perplexity"; do
  [[ -e "$f" ]] || { echo "quality.sh: error: $f is missing (run integrations/llama.cpp/build.sh and the fetch scripts)" >&2; exit 1; }
done

# Bits per value of a type at head dim 256 (Gemma 3 270M).
bits() {
  case "${1%+c}" in
    bf16|f32) [[ "$1" == f32 ]] && echo 32 || echo 16 ;;
    q5_0) echo 5.5 ;; q5_1) echo 6 ;; q4_1) echo 5 ;;
    f16) echo 16 ;; q8_0) echo 8.5 ;; q4_0|iq4_nl) echo 4.5 ;;
    turbo2_0) echo 2.125 ;; turbo3_0) echo 3.125 ;; turbo4_0) echo 4.25 ;;
    tq3_0) echo 3.5 ;; polar1) echo 1.0625 ;; polar2) echo 2.0625 ;;
    polar3) echo 3.0625 ;; polar4) echo 4.0625 ;; *) echo "?" ;;
  esac
}

# Mean bits per value over the layers of SIDE (TYPE[@L=T,...]).
side_bits() {
  local base="${1%%@*}" over="" l b total=0
  [[ "$1" == *@* ]] && over="${1#*@}"
  for ((l = 0; l < layers; ++l)); do
    b="$(bits "$base")"
    for e in ${over//,/ }; do
      [[ "${e%%=*}" == "$l" ]] && b="$(bits "${e#*=}")"
    done
    total="$(awk -v t="$total" -v b="$b" 'BEGIN{print t + b}')"
  done
  awk -v t="$total" -v n="$layers" 'BEGIN{print t / n}'
}

# "L=T,L=T" -> "L:T,L:T" (the glue's syntax).
layer_types() {
  [[ "$1" == *@* ]] && echo "${1#*@}" | tr '=' ':' || true
}

base="$work/f16-c$chunks.kld"
common=(-m "$model" -c 512 --chunks "$chunks" -t "$threads")
if [[ ! -f "$base" ]]; then
  echo "quality.sh: f16 reference logits -> $base" >&2
  "$bin/llama-perplexity" "${common[@]}" -f "$corpus" -ctk f16 -ctv f16 \
    --kl-divergence-base "$base" > "$work/f16-base.log" 2>&1
fi

f16_ppl=""
echo "| K | V | bits/value (K+V)/2 | PPL | ΔPPL vs f16 | mean KLD | top-1 agreement |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for pair in "${pairs[@]}"; do
  kside="${pair%%:*}" vside="${pair##*:}"
  k="${kside%%@*}" v="${vside%%@*}"
  log="$work/$(echo "$kside-$vside" | tr '@=,' '._-')-c$chunks.log"
  centres=""
  if [[ "$k" == *+c ]]; then
    [[ -n "${CENTRES:-}" ]] || { echo "quality.sh: error: $pair needs CENTRES" >&2; exit 1; }
    centres="$CENTRES"
  fi
  # A finished log of the same run is reused (REUSE=0 runs again).
  grep -qE '^Mean +KLD:' "$log" 2>/dev/null && [[ "${REUSE:-1}" == 1 ]] ||
  TQ_K_CENTRES="$centres" TQ_K_LAYER_TYPES="$(layer_types "$kside")" \
    TQ_V_LAYER_TYPES="$(layer_types "$vside")" "$bin/llama-perplexity" "${common[@]}" -ctk "${k%+c}" -ctv "$v" \
    --kl-divergence-base "$base" --kl-divergence > "$log" 2>&1 || {
      echo "| $kside | $vside | | failed: $(grep -m1 -iE 'error|abort' "$log" | cut -c1-120) | | | |"
      continue; }
  ppl="$(grep -E '^Mean PPL\(Q\) +:' "$log" | awk '{print $4, $5, $6}' || true)"
  [[ -n "$ppl" ]] || ppl="$(grep -oE 'Final estimate: PPL = [0-9.]+' "$log" | grep -oE '[0-9.]+$')"
  kld="$(grep -E '^Mean +KLD:' "$log" | awk '{print $3, $4, $5}')"
  top="$(grep -E '^Same top p:' "$log" | awk '{print $4, $5, $6, $7}')"
  [[ "$k:$v" == "f16:f16" ]] && f16_ppl="$ppl"
  delta=""
  [[ -n "$f16_ppl" ]] && delta="$(awk -v a="${ppl%% *}" -v b="${f16_ppl%% *}" 'BEGIN{printf "%+.1f%%", (a/b-1)*100}')"
  avg="$(awk -v a="$(side_bits "$kside")" -v b="$(side_bits "$vside")" 'BEGIN{printf "%.3g", (a+b)/2}')"
  echo "| $kside | $vside | $avg | $ppl | $delta | $kld | $top |"
done
