#!/usr/bin/env bash
# make test's share of fuzzing (issue 22): each target of fuzz/ (all, or the
# ones named) over its seed corpus (scripts/fuzz-seeds.sh: fuzz/seeds keeps
# every input a fuzzer found, so each is a regression test) and
# FUZZ_REPLAY_SECONDS (default 30) of seeded mutations of it, through
# gpupool_fuzz_replay (gcc, no libFuzzer). ctest runs one test per target
# (fuzz_replay_NAME), so that ctest -j runs them side by side. The
# coverage-guided fuzzing under AddressSanitizer is make fuzz (clang).
#
#   tests/fuzz_replay_test.sh REPLAY_BINARY WORK_DIR [TARGET ...]
set -euo pipefail
replay="$1" work="$2"
shift 2
cd "$(dirname "$0")/.."
seconds="${FUZZ_REPLAY_SECONDS:-30}"
mkdir -p "$work/crashes"
failed=0
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for src in fuzz/*_fuzz.cc; do targets+=("$(basename "$src" .cc)"); done
fi
for t in "${targets[@]}"; do
  if [ ! -f "fuzz/$t.cc" ]; then echo "no fuzz target $t (fuzz/$t.cc)" >&2; exit 2; fi
  scripts/fuzz-seeds.sh "$t" "$work/seeds/$t"
  if ! "$replay" --target "$t" --seconds "$seconds" --mutations 100000000 --seed 22 --timeout-s 10 \
      --crash-dir "$work/crashes" "$work/seeds/$t"; then
    echo "FAILED: $t (the input is in $work/crashes/$t-crash; replay: $replay --target $t --mutations 0 DIR)" >&2
    failed=1
  fi
done
exit $failed
