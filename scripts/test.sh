#!/usr/bin/env bash
# The README's second command: set up, build, and run every test (GoogleTest,
# lit and the llama.cpp integration's tests, through ctest).
#
# After tqc's build it builds the llama.cpp integration
# (integrations/llama.cpp/build.sh: llama.cpp from its pinned sdist, the
# kernel pack, the test programs) and fetches the model and corpus its tests
# use; TQC_SKIP_LLAMA=1 skips that, and the integration's tests (ctest label
# llama) then report themselves skipped.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/bootstrap.sh"
"$root/scripts/build.sh"
build="${TQC_BUILD_DIR:-$root/build}"
if [[ "${TQC_SKIP_LLAMA:-0}" != 1 ]]; then
  "$root/integrations/llama.cpp/build.sh"
  "$root/integrations/llama.cpp/fetch-model.sh"
  "$root/integrations/llama.cpp/fetch-corpus.sh"
else
  echo "test.sh: TQC_SKIP_LLAMA=1: the llama.cpp integration is not built;" \
       "its tests (label llama) report skipped"
fi
export PATH="/usr/lib/llvm-22/bin:$PATH"
cd "$build"
status=0
ctest --output-on-failure -j"$(nproc)" || status=$?
# Skipped tests say why on their output, which ctest keeps in its log.
grep -h '^SKIP: ' Testing/Temporary/LastTest.log 2>/dev/null | sort | uniq -c || true
exit "$status"
