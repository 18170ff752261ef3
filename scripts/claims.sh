#!/usr/bin/env bash
# make claims: measures every claim of the requirements with the binary given, fetching the public traces first when
# the binary would not find them.
#   claims.sh GPUPOOL_BINARY [SHARED_DIR] [-- gpupool sim claims options]
# Traces are looked for where the binary looks: $GPUPOOL_TRACES, then SHARED_DIR/traces (default ../shared beside the
# checkout), then the cache (~/.cache/gpupool/traces). Only the first two are used as they are; otherwise
# scripts/fetch-traces.sh fills $GPUPOOL_TRACES or the cache (it fetches only what is missing and verifies each file).
set -euo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ $# -ge 1 ] || { echo "usage: claims.sh GPUPOOL_BINARY [SHARED_DIR] [-- options]" >&2; exit 2; }
bin="$1"; shift
shared="$src/../shared"
if [ $# -ge 1 ] && [ "$1" != "--" ]; then shared="$1"; shift; fi
[ "${1:-}" = "--" ] && shift

if [ -n "${GPUPOOL_TRACES:-}" ]; then
  traces="$GPUPOOL_TRACES"
  "$src/scripts/fetch-traces.sh" "$traces"
elif [ -d "$shared/traces" ]; then
  traces="$shared/traces"
  echo "claims: using the traces in $traces"
else
  traces="${XDG_CACHE_HOME:-$HOME/.cache}/gpupool/traces"
  echo "claims: no \$GPUPOOL_TRACES and no $shared/traces: fetching the public traces into $traces"
  "$src/scripts/fetch-traces.sh" "$traces"
fi
echo "claims: gpupool sim claims (traces from $traces)"
GPUPOOL_TRACES="$traces" exec "$bin" sim claims --scenarios "$src/scenarios" "$@"
