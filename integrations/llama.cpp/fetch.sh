#!/usr/bin/env bash
# Fetches llama.cpp's source: the copy vendored in the pinned sdist of
# llama-cpp-python 0.3.36 on PyPI (checked by SHA-256), extracted to
#   ${TQC_BUILD_DIR:-build}/llama.cpp/src
# Idempotent: a previous extraction whose stamp names the same archive hash
# is kept as it is.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${TQC_BUILD_DIR:-$root/build}"
base="${TQC_LLAMA_DIR:-$build/llama.cpp}"

version=0.3.36
sha256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
tarball="llama_cpp_python-$version.tar.gz"
cache="$base/download"
src="$base/src"
stamp="$src/.tqc-fetch-stamp"

if [[ -f "$stamp" && "$(cat "$stamp")" == "$sha256" ]]; then
  echo "fetch.sh: llama.cpp source already at $src"
  exit 0
fi

mkdir -p "$cache"
if [[ ! -f "$cache/$tarball" ]] ||
   ! echo "$sha256  $cache/$tarball" | sha256sum --check --status; then
  rm -f "$cache/$tarball"
  echo "fetch.sh: downloading the llama-cpp-python==$version sdist"
  python3 -m pip download --quiet --no-binary :all: --no-deps \
    --dest "$cache" "llama-cpp-python==$version"
fi
if ! echo "$sha256  $cache/$tarball" | sha256sum --check --status; then
  echo "fetch.sh: error: $cache/$tarball has SHA-256" \
       "$(sha256sum "$cache/$tarball" | cut -d' ' -f1), expected $sha256" >&2
  exit 1
fi

tmp="$(mktemp -d "$base/extract.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$cache/$tarball" -C "$tmp" \
  "llama_cpp_python-$version/vendor/llama.cpp"
rm -rf "$src"
mv "$tmp/llama_cpp_python-$version/vendor/llama.cpp" "$src"
echo "$sha256" > "$stamp"
echo "fetch.sh: llama.cpp source extracted to $src"
