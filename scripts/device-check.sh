#!/usr/bin/env bash
# scripts/device-check.sh: the checks that need a real NVIDIA GPU (issue 15),
# one line each:
#
#   PASS <check>: <figures>    FAIL <check>: <figures or error>
#   SKIP <check>: <why>        (no driver, no nvcc, GPU not in MIG mode)
#
# Checks, on GPU 0:
#   nvml-registration   `gpupool agent --print-devices` (the NVML backend's
#                       discovery, what registration sends) names the GPU
#                       with the UUID, product and memory nvidia-smi reports,
#                       and a catalog model
#   scrub               gpupool-scrub --verify zeroes the GPU's free memory
#                       and reads samples back (its time and rate); needs
#                       nvcc to build the tool
#   interposer-memory   libgpupool-cuda-cap.so under a 2 GiB cap (less on a
#                       GPU with less free): cuMemGetInfo shows the cap and
#                       the allocation past it is refused with
#                       CUDA_ERROR_OUT_OF_MEMORY, while without the cap the
#                       same program gets more
#   interposer-pacing   a 0.25 share: back-to-back 2 ms kernels keep the GPU
#                       busy 0.25 +/- 10% over 10 s; with an "uncontended"
#                       signal the same share gets at least 0.9
#   mig                 check_mig below: only when GPU 0 is already in MIG
#                       mode (the mode is never changed here)
#
# It builds what it needs into a build directory of its own (default
# build-device beside this script's repository; --build-dir DIR), and never
# changes a GPU setting (no MIG mode, persistence mode, clocks or power
# limits). Exit status: 1 when a check failed, else 0.
#
#   --assume-no-driver   behave as on a machine without the NVIDIA driver
#                        (for the script's own test; nothing is built)
#   --build-dir DIR      where to configure and build
#   --jobs N             build parallelism (default: the CPU count)
#   --prebuilt DIR       use what scripts/device-bundle.sh packed into DIR
#                        instead of building (for a GPU machine without the
#                        build's packages); gpupool-scrub is still compiled
#                        there by nvcc from DIR/gpupool_scrub.cu
set -u

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD="$ROOT/build-device"
JOBS=$(nproc 2>/dev/null || echo 2)
ASSUME_NO_DRIVER=0
PREBUILT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --assume-no-driver) ASSUME_NO_DRIVER=1 ;;
    --build-dir) BUILD=$2; shift ;;
    --jobs) JOBS=$2; shift ;;
    --prebuilt) PREBUILT=$(cd "$2" && pwd) || exit 2; BUILD=$PREBUILT; shift ;;
    *) echo "usage: $0 [--assume-no-driver] [--build-dir DIR] [--jobs N] [--prebuilt DIR]" >&2; exit 2 ;;
  esac
  shift
done

CHECKS="nvml-registration scrub interposer-memory interposer-pacing mig"
FAILED=0
START=$(date +%s)
pass() { echo "PASS $1: $2"; }
fail() { echo "FAIL $1: $2"; FAILED=1; }
skip() { echo "SKIP $1: $2"; }
skip_all() { for c in $CHECKS; do skip "$c" "$1"; done; }
# "key=value" from a probe's output ("" when absent).
value() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }
# A JSON field of gpupool-scrub's one line: a number.
json_number() { printf '%s\n' "$1" | sed -n "s/.*\"$2\":\([0-9.eE+-]*\).*/\1/p" | head -1; }
# awk as a calculator: `calc 'a < b' a=1 b=2` prints 1 or 0.
calc() { local expr=$1; shift; awk "$@" "BEGIN { print ($expr) ? 1 : 0 }"; }

# ---- the driver ----

driver_missing() {
  if [ "$ASSUME_NO_DRIVER" = 1 ]; then echo "no NVIDIA driver (--assume-no-driver)"; return 0; fi
  if ! command -v nvidia-smi >/dev/null 2>&1; then echo "no NVIDIA driver (nvidia-smi is not on the PATH)"; return 0; fi
  local err
  if ! err=$(nvidia-smi -L 2>&1); then echo "the NVIDIA driver does not answer (nvidia-smi -L: $(printf '%s' "$err" | head -1))"; return 0; fi
  if ! printf '%s\n' "$err" | grep -q '^GPU 0'; then echo "nvidia-smi lists no GPU"; return 0; fi
  return 1
}

if why=$(driver_missing); then
  skip_all "$why"
  exit 0
fi

smi() { nvidia-smi --query-gpu="$1" --format=csv,noheader,nounits -i 0 2>/dev/null | head -1 | sed 's/^ *//; s/ *$//'; }
GPU_UUID=$(smi uuid)
GPU_NAME=$(smi name)
GPU_MEMORY_MIB=$(smi memory.total)
GPU_FREE_MIB=$(smi memory.free)
echo "# GPU 0: $GPU_NAME, $GPU_MEMORY_MIB MiB ($GPU_FREE_MIB free), $GPU_UUID; driver $(smi driver_version)"

# ---- the build ----

have_nvcc() { command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] || [ -n "${CUDACXX:-}" ]; }

build() {
  mkdir -p "$BUILD" || return 1
  if ! cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$BUILD/configure.log" 2>&1; then
    echo "cmake configure failed: $(tail -3 "$BUILD/configure.log" | tr '\n' ' ') (full log: $BUILD/configure.log; scripts/install-deps.sh installs the dependencies)"
    return 1
  fi
  local targets="gpupool gpupool-cuda-cap gpupool-cap-gpu-check"
  grep -q '^GPUPOOL_BUILD_SCRUB:BOOL=ON' "$BUILD/CMakeCache.txt" && targets="$targets gpupool-scrub"
  # shellcheck disable=SC2086
  if ! cmake --build "$BUILD" -j "$JOBS" --target $targets >"$BUILD/build.log" 2>&1; then
    echo "build failed: $(grep -m1 -i 'error' "$BUILD/build.log") (full log: $BUILD/build.log)"
    return 1
  fi
}

# A bundle: its three binaries as packed; gpupool-scrub from its source
# where nvcc is found (sm_80 and sm_90 code, as the CMake build makes).
use_prebuilt() {
  local f nvcc
  for f in gpupool libgpupool-cuda-cap.so gpupool-cap-gpu-check; do
    [ -f "$BUILD/$f" ] || { echo "$BUILD/$f is missing (scripts/device-bundle.sh packs it)"; return 1; }
  done
  have_nvcc || return 0
  nvcc=$(command -v nvcc || echo "${CUDACXX:-/usr/local/cuda/bin/nvcc}")
  if ! "$nvcc" -std=c++17 -O2 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
         -o "$BUILD/gpupool-scrub" "$BUILD/gpupool_scrub.cu" >"$BUILD/scrub-build.log" 2>&1; then
    echo "nvcc failed on gpupool_scrub.cu: $(grep -m1 -i error "$BUILD/scrub-build.log")"; return 1
  fi
}
# The bundle's own shared libraries, for gpupool alone.
[ -n "$PREBUILT" ] && [ -d "$PREBUILT/lib" ] && export GPUPOOL_BUNDLE_LIBS="$PREBUILT/lib"

BUILT=0
if [ -n "$PREBUILT" ]; then
  if ! why=$(use_prebuilt); then
    echo "FAIL build: $why"
    for c in nvml-registration scrub interposer-memory interposer-pacing; do skip "$c" "the bundle is incomplete"; done
    FAILED=1
  else
    BUILT=1
    echo "# prebuilt bundle $BUILD (commit $(cat "$BUILD/commit" 2>/dev/null || echo unknown)), ready in $(( $(date +%s) - START )) s"
  fi
elif ! why=$(build); then
  echo "FAIL build: $why"
  for c in nvml-registration scrub interposer-memory interposer-pacing; do skip "$c" "the build failed"; done
  FAILED=1
else
  BUILT=1
  echo "# built in $BUILD in $(( $(date +%s) - START )) s"
fi

# ---- checks ----

check_nvml_registration() {
  local out err model memory
  if ! out=$(timeout 60 env LD_LIBRARY_PATH="${GPUPOOL_BUNDLE_LIBS:-}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$BUILD/gpupool" agent --print-devices 2>&1); then
    fail nvml-registration "gpupool agent --print-devices: $(printf '%s' "$out" | tail -1)"; return
  fi
  # The JSON's keys are sorted: GPU 0's "memory_mib" and "model" come first.
  model=$(printf '%s\n' "$out" | sed -n 's/^ *"model": "\(.*\)",\{0,1\}$/\1/p' | head -1)
  memory=$(printf '%s\n' "$out" | sed -n 's/^ *"memory_mib": \([0-9]*\),\{0,1\}$/\1/p' | head -1)
  err=""
  printf '%s\n' "$out" | grep -q "\"uuid\": \"$GPU_UUID\"" || err="$err uuid $GPU_UUID not reported;"
  printf '%s\n' "$out" | grep -q "\"product\": \"$GPU_NAME\"" || err="$err product \"$GPU_NAME\" not reported;"
  # Within 1% of nvidia-smi's total (drivers differ in what they reserve).
  if [ -z "$memory" ] || [ "$(calc 'm - s <= s / 100 && s - m <= s / 100' -v m="$memory" -v s="$GPU_MEMORY_MIB")" != 1 ]; then
    err="$err memory ${memory:-?} MiB against nvidia-smi's $GPU_MEMORY_MIB;"
  fi
  [ -n "$model" ] || err="$err no catalog model for \"$GPU_NAME\";"
  if [ -n "$err" ]; then
    fail nvml-registration "${err# } output: $(printf '%s' "$out" | tr -s ' \n' ' ' | cut -c1-400)"
  else
    pass nvml-registration "GPU 0 $GPU_UUID: product \"$GPU_NAME\", model $model, $memory MiB (nvidia-smi: $GPU_MEMORY_MIB MiB)"
  fi
}

check_scrub() {
  if [ ! -x "$BUILD/gpupool-scrub" ]; then
    if have_nvcc; then fail scrub "nvcc is present but gpupool-scrub was not built (see $BUILD/configure.log)"
    else skip scrub "no CUDA compiler (nvcc) to build gpupool-scrub"; fi
    return
  fi
  local out bytes free seconds gbps
  if ! out=$(CUDA_VISIBLE_DEVICES=$GPU_UUID timeout 180 "$BUILD/gpupool-scrub" --verify 2>&1); then
    fail scrub "gpupool-scrub --verify: $(printf '%s' "$out" | tail -1)"; return
  fi
  bytes=$(json_number "$out" bytes); free=$(json_number "$out" free_bytes)
  seconds=$(json_number "$out" seconds); gbps=$(json_number "$out" gbps)
  # All of the free memory but the driver's 64 MiB headroom and what the
  # memsets' own context took, within 1 GiB.
  if [ -z "$bytes" ] || [ "$(calc 'b > 0 && b >= f - 64*2^20 - 2^30' -v b="$bytes" -v f="$free")" != 1 ]; then
    fail scrub "zeroed ${bytes:-?} of ${free:-?} free bytes: $out"; return
  fi
  pass scrub "zeroed and verified $(awk -v b="$bytes" 'BEGIN{printf "%.1f", b/2^30}') GiB of $(awk -v b="$free" 'BEGIN{printf "%.1f", b/2^30}') GiB free in $seconds s of GPU time ($gbps GB/s)"
}

# The cap's environment for GPU 0 (and nothing of the caller's GPUPOOL_CUDA_*).
capped() {
  env -u GPUPOOL_CUDA_MEMORY_LIMIT_MIB -u GPUPOOL_CUDA_COMPUTE_SHARE -u GPUPOOL_CUDA_CAP_STATE \
    -u GPUPOOL_CUDA_CONTENTION_FILE CUDA_VISIBLE_DEVICES="$GPU_UUID" LD_PRELOAD="$BUILD/libgpupool-cuda-cap.so" "$@"
}

check_interposer_memory() {
  local cap=2048 chunk=256 out plain expected
  [ "$GPU_FREE_MIB" -lt 4096 ] && cap=$(( GPU_FREE_MIB / 2 / chunk * chunk ))
  if [ "$cap" -lt "$chunk" ]; then fail interposer-memory "GPU 0 has only $GPU_FREE_MIB MiB free"; return; fi
  expected=$(( cap / chunk ))
  if ! out=$(capped GPUPOOL_CUDA_MEMORY_LIMIT_MIB=$cap timeout 60 "$BUILD/gpupool-cap-gpu-check" memory $chunk 2>&1); then
    fail interposer-memory "under the cap: $(printf '%s' "$out" | tail -1)"; return
  fi
  if ! plain=$(CUDA_VISIBLE_DEVICES=$GPU_UUID timeout 60 "$BUILD/gpupool-cap-gpu-check" memory $chunk 2>&1); then
    fail interposer-memory "without the cap: $(printf '%s' "$plain" | tail -1)"; return
  fi
  local total free allocated refused plain_allocated
  total=$(value "$out" info_total_mib); free=$(value "$out" info_free_mib)
  allocated=$(value "$out" allocated); refused=$(value "$out" refused); plain_allocated=$(value "$plain" allocated)
  local figures="cap $cap MiB: cuMemGetInfo total $total MiB free $free MiB; $allocated x $chunk MiB allocated, the next refused with CUDA error $refused; $plain_allocated without the cap"
  if [ "$total" = "$cap" ] && [ "$free" -le "$cap" ] && [ "$allocated" = "$expected" ] && [ "$refused" = 2 ] &&
     [ "${plain_allocated:-0}" -gt "$expected" ]; then
    pass interposer-memory "$figures"
  else
    fail interposer-memory "$figures (expected total $cap, $expected allocated, error 2, more without the cap)"
  fi
}

check_interposer_pacing() {
  local out free_run fraction signal dir
  if ! out=$(capped GPUPOOL_CUDA_COMPUTE_SHARE=0.25 timeout 60 "$BUILD/gpupool-cap-gpu-check" pace 10 2 2>&1); then
    fail interposer-pacing "share 0.25: $(printf '%s' "$out" | tail -1)"; return
  fi
  dir=$(mktemp -d) || { fail interposer-pacing "mktemp failed"; return; }
  signal="$dir/state"
  echo "uncontended $(( $(date +%s%3N) + 60000 ))" >"$signal"
  if ! free_run=$(capped GPUPOOL_CUDA_COMPUTE_SHARE=0.25 GPUPOOL_CUDA_CONTENTION_FILE="$signal" timeout 60 \
                    "$BUILD/gpupool-cap-gpu-check" pace 3 2 2>&1); then
    rm -rf "$dir"; fail interposer-pacing "uncontended: $(printf '%s' "$free_run" | tail -1)"; return
  fi
  rm -rf "$dir"
  fraction=$(value "$out" busy_fraction)
  local uncontended figures
  uncontended=$(value "$free_run" busy_fraction)
  figures="share 0.25: busy $fraction over $(value "$out" elapsed_s) s ($(value "$out" launches) launches of $(value "$out" kernel_ms) ms); uncontended: busy $uncontended over $(value "$free_run" elapsed_s) s"
  if [ "$(calc 'f >= 0.225 && f <= 0.275 && u >= 0.9' -v f="${fraction:-0}" -v u="${uncontended:-0}")" = 1 ]; then
    pass interposer-pacing "$figures"
  else
    fail interposer-pacing "$figures (expected 0.225..0.275 and >= 0.9)"
  fi
}

# MIG create/destroy, only on a GPU already in MIG mode (never toggled here).
check_mig() {
  local mode
  mode=$(nvidia-smi --query-gpu=mig.mode.current --format=csv,noheader -i 0 2>/dev/null | head -1 | tr -d ' ')
  if [ "$mode" != "Enabled" ]; then
    skip mig "GPU not in MIG mode (mig.mode.current: ${mode:-unknown})"
    return
  fi
  # The agent's own MIG code on the real driver: the smallest profile at its
  # first free placement, created, listed, destroyed, gone (src/agent/mig_check.h).
  local out
  if out=$(timeout 120 env LD_LIBRARY_PATH="${GPUPOOL_BUNDLE_LIBS:-}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$BUILD/gpupool" agent --mig-check 0 2>&1); then
    pass mig "$out"
  else
    fail mig "$out"
  fi
}

if [ "$BUILT" = 1 ]; then
  check_nvml_registration
  check_scrub
  check_interposer_memory
  check_interposer_pacing
fi
check_mig
echo "# done in $(( $(date +%s) - START )) s"
exit $FAILED
