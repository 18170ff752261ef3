#!/usr/bin/env bash
# make test's share of fuzzing (issue 22): every target of fuzz/ over its seed
# corpus (scripts/fuzz-seeds.sh: fuzz/seeds keeps every input a fuzzer found,
# so each is a regression test) and FUZZ_REPLAY_SECONDS (default 3) of seeded
# mutations of it, through gpupool_fuzz_replay (gcc, no libFuzzer). The
# coverage-guided fuzzing under AddressSanitizer is make fuzz (clang).
#
#   tests/fuzz_replay_test.sh REPLAY_BINARY WORK_DIR
set -euo pipefail
replay="$1" work="$2"
cd "$(dirname "$0")/.."
seconds="${FUZZ_REPLAY_SECONDS:-3}"
mkdir -p "$work/crashes"
failed=0
for src in fuzz/*_fuzz.cc; do
  t="$(basename "$src" .cc)"
  scripts/fuzz-seeds.sh "$t" "$work/seeds/$t"
  if ! "$replay" --target "$t" --seconds "$seconds" --mutations 1000000 --seed 22 --timeout-s 10 \
      --crash-dir "$work/crashes" "$work/seeds/$t"; then
    echo "FAILED: $t (the input is in $work/crashes/$t-crash; replay: $replay --target $t --mutations 0 DIR)" >&2
    failed=1
  fi
done
exit $failed
