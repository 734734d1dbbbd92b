#!/usr/bin/env bash
# Fetches the English prose corpus for perplexity runs: Dasher's English
# training text (training_english_GB.txt, 664 lines, ~318 KB of sentences
# from books, newspapers and essays; GPL-2+) from Debian bookworm's
# dasher-data package, checked by SHA-256, to
#   ${TQC_BUILD_DIR:-build}/corpus/english.txt
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${TQC_BUILD_DIR:-$root/build}"

package=dasher-data
version='5.0.0~beta~repack2-4'
deb_sha256=6ab490f6ef1af82a8f6a2e41099953323cd34ecc057b30c4dd85cd50c28a3436
member=./usr/share/dasher/training_english_GB.txt
sha256=ee65ffaea0afc7b84f2995b5360778a0a561c7abc219cff48f27dae2fac663b9
out="$build/corpus/english.txt"
cache="$build/corpus/download"

if [[ -f "$out" ]] && echo "$sha256  $out" | sha256sum --check --status; then
  echo "fetch-corpus.sh: $out already present"
  exit 0
fi

mkdir -p "$cache"
deb_glob=("$cache/${package}_"*"_all.deb")
if [[ ! -f "${deb_glob[0]}" ]] ||
   ! echo "$deb_sha256  ${deb_glob[0]}" | sha256sum --check --status; then
  rm -f "$cache/${package}_"*.deb
  # apt-get download writes into the current directory; it needs the
  # package lists (apt-get update) on a fresh machine.
  if ! (cd "$cache" && apt-get download "$package=$version" 2>/dev/null); then
    apt-get update -qq
    (cd "$cache" && apt-get download "$package=$version")
  fi
fi
deb_glob=("$cache/${package}_"*"_all.deb")
deb="${deb_glob[0]}"
if ! echo "$deb_sha256  $deb" | sha256sum --check --status; then
  echo "fetch-corpus.sh: error: $deb has SHA-256" \
       "$(sha256sum "$deb" | cut -d' ' -f1), expected $deb_sha256" >&2
  exit 1
fi

tmp="$(mktemp -d "$build/corpus/extract.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp" "$member"
if ! echo "$sha256  $tmp/$member" | sha256sum --check --status; then
  echo "fetch-corpus.sh: error: $member has SHA-256" \
       "$(sha256sum "$tmp/$member" | cut -d' ' -f1), expected $sha256" >&2
  exit 1
fi
mv "$tmp/$member" "$out"
echo "fetch-corpus.sh: $out"
