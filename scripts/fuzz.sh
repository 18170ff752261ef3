#!/usr/bin/env bash
# make fuzz: builds the libFuzzer targets of fuzz/ with clang in their own
# build folder (every object instrumented for coverage and AddressSanitizer)
# and runs each for FUZZ_SECONDS (default 600) on a seed corpus taken from the
# repository (scripts/fuzz-seeds.sh: fuzz/seeds, examples, scenarios,
# fixtures).
#
#   scripts/fuzz.sh [TARGET ...]      env: FUZZ_SECONDS, FUZZ_BUILD_DIR, JOBS
#
# Prints, per target, the executions, the corpus size and the findings; a
# crash, leak or timeout leaves its input in FUZZ_BUILD_DIR/artifacts/TARGET/
# and makes the script exit 1 (turn the input into a regression test).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH="${FUZZ_SECONDS:-600}"
BUILD="${FUZZ_BUILD_DIR:-build-fuzz}"
JOBS="${JOBS:-$(nproc)}"
CLANG_VERSION=19

# clang 19 and its runtime (libFuzzer, ASan) from Debian: the distribution's
# default clang (14) cannot compile C++23's <expected> from libstdc++ 12.
packages=(clang-$CLANG_VERSION libclang-rt-$CLANG_VERSION-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "==> installing ${missing[*]} (the fuzz build's compiler)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  echo "==> configuring $BUILD with clang++-$CLANG_VERSION and GPUPOOL_FUZZ=ON"
  CC=clang-$CLANG_VERSION CXX=clang++-$CLANG_VERSION cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGPUPOOL_FUZZ=ON >/dev/null
fi
echo "==> building the fuzz targets ($JOBS jobs)"
cmake --build "$BUILD" -j "$JOBS" --target fuzz_targets

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in fuzz/*_fuzz.cc; do targets+=("$(basename "$f" .cc)"); done
fi
failed=0
printf '%-22s %12s %10s %8s  %s\n' target executions exec/s corpus findings
for t in "${targets[@]}"; do
  scripts/fuzz-seeds.sh "$t" "$BUILD/seeds/$t"
  corpus="$BUILD/corpus/$t"; artifacts="$BUILD/artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  log="$BUILD/logs/$t.log"; mkdir -p "$(dirname "$log")"
  set +e
  "$BUILD/$t" -max_total_time="$SECONDS_EACH" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$artifacts/" -print_final_stats=1 "$corpus" "$BUILD/seeds/$t" >"$log" 2>&1
  rc=$?
  set -e
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  size=$(find "$corpus" -type f | wc -l)
  found=$(find "$artifacts" -type f | wc -l)
  what="none"
  if [ "$rc" -ne 0 ] || [ "$found" -gt 0 ]; then
    failed=1
    what="$found input(s) in $artifacts (exit $rc; log $log)"
  fi
  printf '%-22s %12s %10s %8s  %s\n' "$t" "${runs:-0}" "${rate:-0}" "$size" "$what"
done
exit $failed
