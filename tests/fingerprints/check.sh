#!/usr/bin/env bash
# Behaviour fingerprints of the deterministic engine (issue 21).
#
#   check.sh [--update] GPUPOOL_BINARY SOURCE_DIR
#
# Recomputes every fingerprint with GPUPOOL_BINARY and compares it with
# tests/fingerprints/expected.txt (one line per item: name, sha256):
#   scenario/<path>      event_log_sha256 of `gpupool sim run FILE --json`, for
#                        every scenarios/**/*.yaml (claims included)
#   replay/openb-default event_log_sha256 of the openb default replay
#                        (openb-default-replay.yaml beside this script)
#   claims/<ID>          sha256 of the canonical JSON {baseline, measured} of
#                        that claim in `gpupool sim claims --json` (this covers
#                        the baseline runs: FIFO, lending off, whole GPUs, ...)
#   fgd/<workload>       sha256 of the canonical JSON of `gpupool sim fgd
#                        --policy all --seeds 42-51 --json` without timings
#                        (wall_seconds), on the openb default trace and on the
#                        generated cluster (--generate)
# Canonical JSON: keys sorted, separators "," and ":", numbers as Python's json
# writes them, no final newline. Any difference is printed (expected vs got)
# and the exit status is 1; an item that cannot be computed fails too.
# Items that need the public traces (../shared/traces beside the checkout, or
# $GPUPOOL_TRACES) are skipped, saying so, when that folder is absent; when it
# is present they must run. Items that need python3 (the canonical JSON) are
# skipped, saying so, without it.
#
# --update rewrites expected.txt from this run: do it only for a deliberate
# behaviour change, and say why in the commit. Items skipped in this run keep
# their old line.
set -uo pipefail

update=0
if [ "${1:-}" = "--update" ]; then
  update=1
  shift
fi
if [ $# -ne 2 ]; then
  echo "usage: $0 [--update] GPUPOOL_BINARY SOURCE_DIR" >&2
  exit 2
fi
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
src=$(cd "$2" && pwd) || exit 2
if [ ! -x "$bin" ]; then
  echo "fingerprints: $1 is not an executable" >&2
  exit 2
fi
here="$src/tests/fingerprints"
expected_file="$here/expected.txt"

traces="${GPUPOOL_TRACES:-$src/../shared/traces}"
export GPUPOOL_TRACES="$traces"  # the binary reads exactly this folder, whatever the working directory
have_traces=0
[ -d "$traces" ] && have_traces=1
have_python=0
command -v python3 >/dev/null 2>&1 && have_python=1

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 2  # no ../shared/traces found by accident from here

declare -A got=()     # name -> sha256
declare -A skipped=() # name (or "claims/*") -> why
declare -A failed=()  # name (or "claims/*") -> why

record() { got[$1]=$2; }
fail() { failed[$1]=$2; }
# Whether NAME was skipped or failed in this run (by name or as claims/*).
in_set() {  # in_set ARRAY NAME
  local -n arr=$1
  [ -n "${arr[$2]:-}" ] || { [ "${2#claims/}" != "$2" ] && [ -n "${arr["claims/*"]:-}" ]; }
}

# Canonical JSON: keys sorted, no spaces, the timing fields dropped; numbers as
# Python writes doubles (shortest round trip), so formatting of the binary's
# output does not matter, only the values.
canonical() {  # canonical FILE fgd | canonical FILE claim ID | canonical FILE claim-ids
  python3 - "$@" <<'EOF'
import json, sys
TIMINGS = {"wall_seconds"}
def strip(o):
    if isinstance(o, dict):
        return {k: strip(v) for k, v in o.items() if k not in TIMINGS}
    if isinstance(o, list):
        return [strip(v) for v in o]
    return o
data = json.load(open(sys.argv[1]))
if sys.argv[2] == "claim-ids":
    print("\n".join(c["id"] for c in data))
    sys.exit(0)
if sys.argv[2] == "claim":
    found = [c for c in data if c.get("id") == sys.argv[3]]
    if len(found) != 1:
        sys.exit("no claim " + sys.argv[3])
    c = found[0]
    if "skipped" in c:
        print("SKIPPED " + str(c["skipped"]))
        sys.exit(0)
    data = {"baseline": c["baseline"], "measured": c["measured"]}
print(json.dumps(strip(data), sort_keys=True, separators=(",", ":"), allow_nan=True))
EOF
}
sha() { sha256sum | cut -d' ' -f1; }  # of the canonical text, without a final newline

trace_missing_msg="needs the public traces ($traces is not here)"

# --- event logs of the scenarios and of the openb default replay -------------
event_log() {  # event_log NAME FILE
  local name=$1 file=$2
  if "$bin" sim run "$file" --json >"$work/out.json" 2>"$work/err.txt"; then
    local h
    h=$(sed -n 's/^ *"event_log_sha256": *"\([0-9a-f]\{64\}\)".*/\1/p' "$work/out.json")
    if [ -z "$h" ]; then
      fail "$name" "no event_log_sha256 in the output of sim run"
    else
      record "$name" "$h"
    fi
  elif [ $have_traces = 0 ] && grep -q "not here" "$work/err.txt"; then
    skipped[$name]=$trace_missing_msg
  else
    fail "$name" "sim run failed: $(head -c 400 "$work/err.txt")"
  fi
}

while IFS= read -r f; do
  rel=${f#"$src/scenarios/"}
  event_log "scenario/${rel%.yaml}" "$f"
done < <(find "$src/scenarios" -name '*.yaml' -type f | LC_ALL=C sort)
event_log "replay/openb-default" "$here/openb-default-replay.yaml"

# --- the FGD protocol, all policies, seeds 42-51 ------------------------------
fgd() {  # fgd NAME ARGS...
  local name=$1 c
  shift
  if [ $have_python = 0 ]; then
    skipped[$name]="needs python3 (canonical JSON)"
  elif ! "$bin" sim fgd "$@" --policy all --seeds 42-51 --json >"$work/fgd.json" 2>"$work/err.txt"; then
    fail "$name" "sim fgd failed: $(head -c 400 "$work/err.txt")"
  elif ! c=$(canonical "$work/fgd.json" fgd); then
    fail "$name" "cannot read the output of sim fgd"
  else
    record "$name" "$(printf '%s' "$c" | sha)"
  fi
}
openb="$traces/alibaba-gpu-2023"
if [ $have_traces = 0 ]; then
  skipped["fgd/openb_pod_list_default"]=$trace_missing_msg
else
  fgd "fgd/openb_pod_list_default" --nodes "$openb/openb_node_list_gpu_node.csv" \
    --pods "$openb/openb_pod_list_default.csv"
fi
fgd "fgd/generated" --generate

# --- the claims' figures (ours and the baselines) ----------------------------
if [ $have_python = 0 ]; then
  skipped["claims/*"]="needs python3 (canonical JSON)"
else
  if ! "$bin" sim claims --json --scenarios "$src/scenarios" >"$work/claims.json" 2>"$work/err.txt"; then
    fail "claims/*" "sim claims failed: $(head -c 400 "$work/err.txt")"
  elif ! ids=$(canonical "$work/claims.json" claim-ids); then
    fail "claims/*" "cannot read the output of sim claims"
  else
    for id in $ids; do
      c=$(canonical "$work/claims.json" claim "$id") || { fail "claims/$id" "cannot read its figures"; continue; }
      case "$c" in
        SKIPPED*)
          if [ $have_traces = 0 ]; then skipped["claims/$id"]=$trace_missing_msg
          else fail "claims/$id" "skipped by sim claims although the traces are here: ${c#SKIPPED }"; fi ;;
        *) record "claims/$id" "$(printf '%s' "$c" | sha)" ;;
      esac
    done
  fi
fi

# --- compare or update --------------------------------------------------------
declare -A want=()
declare -a want_order=()
if [ -f "$expected_file" ]; then
  while read -r name hash _; do
    case "$name" in "" | "#"*) continue ;; esac
    want[$name]=$hash
    want_order+=("$name")
  done <"$expected_file"
fi

for name in $(printf '%s\n' "${!skipped[@]}" | LC_ALL=C sort); do
  echo "SKIP  $name: ${skipped[$name]}"
done

if [ $update = 1 ]; then
  if [ ${#failed[@]} -gt 0 ]; then
    for name in "${!failed[@]}"; do echo "FAIL  $name: ${failed[$name]}"; done
    echo "fingerprints: not updated: some items could not be computed" >&2
    exit 1
  fi
  {
    echo "# Behaviour fingerprints of the deterministic engine (tests/fingerprints/check.sh)."
    echo "# name sha256; rewrite only with check.sh --update, for a deliberate behaviour change."
    for name in $(printf '%s\n' "${!got[@]}" "${!want[@]}" | LC_ALL=C sort -u); do
      if [ -n "${got[$name]:-}" ]; then
        echo "$name ${got[$name]}"
      elif in_set skipped "$name"; then
        echo "$name ${want[$name]}"  # not computed here: keep the old value
      fi
    done
  } >"$expected_file.new" && mv "$expected_file.new" "$expected_file"
  for name in "${!got[@]}"; do
    if [ "${want[$name]:-}" != "${got[$name]}" ]; then
      echo "UPDATED $name: ${want[$name]:-(new)} -> ${got[$name]}"
    fi
  done
  echo "fingerprints: wrote $expected_file (${#got[@]} computed, ${#skipped[@]} skipped)"
  exit 0
fi

status=0
checked=0
for name in $(printf '%s\n' "${!failed[@]}" | LC_ALL=C sort); do
  echo "FAIL  $name: ${failed[$name]}"
  status=1
done
for name in $(printf '%s\n' "${!got[@]}" | LC_ALL=C sort); do
  checked=$((checked + 1))
  if [ -z "${want[$name]:-}" ]; then
    echo "NEW   $name: not in expected.txt (got ${got[$name]}); pin it with --update"
    status=1
  elif [ "${want[$name]}" != "${got[$name]}" ]; then
    echo "MOVED $name"
    echo "        expected ${want[$name]}"
    echo "        got      ${got[$name]}"
    status=1
  else
    echo "ok    $name"
  fi
done
for name in "${want_order[@]}"; do
  if [ -z "${got[$name]:-}" ] && ! in_set skipped "$name" && ! in_set failed "$name"; then
    echo "GONE  $name: expected ${want[$name]} but this run has no such item"
    status=1
  fi
done
if [ $status = 0 ]; then
  echo "fingerprints: all $checked match (${#skipped[@]} skipped)"
else
  echo "fingerprints: behaviour moved or could not be checked (see above); if deliberate, run" \
    "$0 --update $1 $2 and say why in the commit" >&2
fi
exit $status
