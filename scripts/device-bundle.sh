#!/usr/bin/env bash
# scripts/device-bundle.sh: packs what scripts/device-check.sh runs into one
# folder, for a GPU machine that cannot build gpupool (no network, none of the
# build's Debian packages): the stripped `gpupool`, `libgpupool-cuda-cap.so`,
# `gpupool-cap-gpu-check`, the tool's source `gpupool_scrub.cu` (compiled
# there by nvcc, which that machine has and this one usually does not), and
# lib/ with the shared libraries `gpupool` links, except the C library's own
# (libc, libm, libdl, libpthread, librt, the loader: the machine's newer glibc
# serves them).
#
#   scripts/device-bundle.sh [--build-dir DIR] OUT
#       DIR: a build with the targets gpupool, gpupool-cuda-cap and
#       gpupool-cap-gpu-check (default build/); OUT is created or replaced.
#   then, there:  scripts/device-check.sh --prebuilt OUT
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD="$ROOT/build"
if [ "${1:-}" = --build-dir ]; then BUILD=$2; shift 2; fi
[ $# -eq 1 ] || { echo "usage: $0 [--build-dir DIR] OUT" >&2; exit 2; }
OUT=$1

for f in gpupool libgpupool-cuda-cap.so gpupool-cap-gpu-check; do
  [ -f "$BUILD/$f" ] || { echo "$BUILD/$f is missing: build the targets gpupool gpupool-cuda-cap gpupool-cap-gpu-check" >&2; exit 1; }
done
rm -rf "$OUT"
mkdir -p "$OUT/lib"
strip -o "$OUT/gpupool" "$BUILD/gpupool"
cp "$BUILD/libgpupool-cuda-cap.so" "$BUILD/gpupool-cap-gpu-check" "$OUT/"
cp "$ROOT/tools/scrub/gpupool_scrub.cu" "$OUT/"
# ldd's "name => /path (addr)" lines; glibc's own libraries stay behind.
ldd "$BUILD/gpupool" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' |
  while read -r name path; do
    case "$name" in
      libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|ld-linux*) continue ;;
    esac
    cp -L "$path" "$OUT/lib/$name"
  done
git -C "$ROOT" rev-parse --short HEAD >"$OUT/commit" 2>/dev/null || echo unknown >"$OUT/commit"
echo "bundle $OUT: $(du -sh "$OUT" | cut -f1), $(ls "$OUT/lib" | wc -l) libraries, commit $(cat "$OUT/commit")"
