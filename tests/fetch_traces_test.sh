#!/usr/bin/env bash
# scripts/fetch-traces.sh and scripts/claims.sh (make claims) against a loopback mirror of the public sources, built
# from a copy of ../shared/traces in raw.githubusercontent.com's layout (the sources themselves cannot be reached
# from the build machines):
#   1. a corrupted file on the mirror is rejected by its checksum and never installed; the others are;
#   2. run again once the mirror is right: only what was missing is fetched (resumable, idempotent);
#   3. --check verifies the folder; a third run fetches nothing;
#   3b. a download cut off half way is resumed from where it stopped (a Range request for the rest only);
#   4. an unreachable base URL fails fast with a message that says so;
#   5. make claims' script, with no ../shared and no $GPUPOOL_TRACES, fetches into the cache and runs every claim
#      (none skipped).
#   fetch_traces_test.sh GPUPOOL_BINARY SOURCE_DIR
# Exits 77 (skipped) when ../shared/traces, python3 or curl is missing.
set -uo pipefail
bin="$1"
src=$(cd "$2" && pwd)
shared="${GPUPOOL_TRACES:-$src/../shared/traces}"
skip() { echo "fetch_traces_test: skipped: $*"; exit 77; }
fail() { echo "fetch_traces_test: FAIL: $*" >&2; exit 1; }
[ -d "$shared" ] || skip "no traces folder to mirror ($shared)"
command -v python3 >/dev/null || skip "needs python3 (the mirror's HTTP server)"
command -v curl >/dev/null || skip "needs curl"

work=$(mktemp -d)
server_pid=""
trap '[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$work"' EXIT
manifest="$src/scripts/traces/manifest.tsv"
mirror="$work/mirror"

# The mirror: each source at OWNER/REPO/COMMIT/PATH; archives hold their member one folder down.
while IFS=$'\t' read -r dest sha kind source; do
  case "$dest" in ''|'#'*) continue ;; esac
  [ "$kind" = derived ] && continue
  s="${source%%#*}"; repo="${s%%@*}"; s="${s#*@}"; commit="${s%%:*}"; path="${s#*:}"
  out="$mirror/$repo/$commit/$path"
  mkdir -p "$(dirname "$out")"
  if [ "$kind" = file ]; then
    cp "$shared/$dest" "$out"
  else
    member="${source##*#}"
    mkdir -p "$work/tar/${member%.csv}"
    cp "$shared/$dest" "$work/tar/${member%.csv}/$member"
    tar -czf "$out" -C "$work/tar" "${member%.csv}/$member"
  fi
done <"$manifest"
victim=$(find "$mirror" -name philly_runtime.csv)
cp "$victim" "$work/philly.good"
printf 'X' | dd of="$victim" bs=1 seek=100 conv=notrunc status=none

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# The mirror's server: Python's file server, plus "Range: bytes=N-" (as GitHub's raw host answers it), each range
# logged.
cat >"$work/serve.py" <<'PY'
import http.server, os, sys
class Handler(http.server.SimpleHTTPRequestHandler):
    def send_head(self):
        rng = self.headers.get("Range", "")
        path = self.translate_path(self.path)
        if not rng.startswith("bytes=") or not rng.endswith("-") or not os.path.isfile(path):
            return super().send_head()
        start, size = int(rng[6:-1]), os.path.getsize(path)
        if start >= size:
            self.send_error(416)
            return None
        sys.stderr.write("RANGE %s %d-%d\n" % (self.path, start, size - 1))
        f = open(path, "rb")
        f.seek(start)
        self.send_response(206)
        self.send_header("Content-Range", "bytes %d-%d/%d" % (start, size - 1, size))
        self.send_header("Content-Length", str(size - start))
        self.end_headers()
        return f
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
PY
(cd "$mirror" && exec python3 "$work/serve.py" "$port" >"$work/server.log" 2>&1) &
server_pid=$!
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
export GPUPOOL_TRACES_BASE_URL="http://127.0.0.1:$port"
unset GPUPOOL_TRACES
export HOME="$work/home" XDG_CACHE_HOME=""
gets() { grep -c '"GET ' "$work/server.log"; }

# 1. The corrupted file is refused; the rest is installed.
out="$work/traces"
if "$src/scripts/fetch-traces.sh" "$out" >"$work/run1.log" 2>&1; then fail "a corrupted file was accepted"; fi
grep -q "philly-runtime/philly_runtime.csv: checksum mismatch" "$work/run1.log" || fail "no checksum message: $(cat "$work/run1.log")"
[ ! -e "$out/philly-runtime/philly_runtime.csv" ] || fail "the corrupted file was installed"
[ -f "$out/alibaba-gpu-2023/openb_pod_list_default.csv" ] || fail "the good files were not installed"
[ -f "$out/alibaba-gpu-2023/fgd-expected-results/fgd_policy_summary.csv" ] || fail "the derived summary is missing"

# 2. Fixed mirror: only the missing file is fetched.
cp "$work/philly.good" "$victim"
before=$(gets)
"$src/scripts/fetch-traces.sh" "$out" >"$work/run2.log" 2>&1 || fail "second run: $(cat "$work/run2.log")"
[ $(( $(gets) - before )) = 1 ] || fail "second run fetched $(( $(gets) - before )) files, not 1"
grep -q "1 fetched, 0 failed" "$work/run2.log" || fail "second run: $(cat "$work/run2.log")"
[ -f "$out/README.md" ] || fail "no README.md in the traces folder"

# 3. Verified, and nothing more fetched.
"$src/scripts/fetch-traces.sh" --check "$out" >/dev/null || fail "--check after a full fetch"
before=$(gets)
"$src/scripts/fetch-traces.sh" "$out" >/dev/null 2>&1 || fail "third run failed"
[ "$(gets)" = "$before" ] || fail "a complete folder was fetched again"
(cd "$out" && sed -e '/^#/d' -e 's/^\([^\t]*\)\t\([^\t]*\).*/\2  \1/' "$manifest" | sha256sum --quiet -c -) || fail "checksums"

# 3b. A download cut off half way: the next run asks for the rest only, and the file checks.
philly="$out/philly-runtime/philly_runtime.csv"
size=$(stat -c %s "$philly")
half=$(( size / 2 ))
mkdir -p "$out/.partial/philly-runtime"
head -c "$half" "$philly" >"$out/.partial/philly-runtime/philly_runtime.csv.part"
rm -f "$philly"
"$src/scripts/fetch-traces.sh" "$out" >"$work/resume.log" 2>&1 || fail "resume: $(cat "$work/resume.log")"
grep -q "^RANGE .*philly_runtime.csv $half-$(( size - 1 ))\$" "$work/server.log" ||
  fail "no ranged request for bytes $half- of philly_runtime.csv: $(grep RANGE "$work/server.log")"
"$src/scripts/fetch-traces.sh" --check "$out" >/dev/null || fail "--check after a resumed fetch"

# 4. Offline: fails at once, saying so.
start=$(date +%s)
if "$src/scripts/fetch-traces.sh" --base-url http://127.0.0.1:9 "$work/offline" >"$work/off.log" 2>&1; then fail "offline fetch succeeded"; fi
grep -q "cannot reach" "$work/off.log" || fail "offline message: $(cat "$work/off.log")"
[ $(( $(date +%s) - start )) -lt 30 ] || fail "offline fetch took more than 30 s"

# 5. make claims on a machine without ../shared: fetches into the cache, runs every claim.
cd "$work" && "$src/scripts/claims.sh" "$bin" "$work/no-shared" >"$work/claims.log" 2>&1 || fail "claims: $(tail -20 "$work/claims.log")"
[ -f "$HOME/.cache/gpupool/traces/philly-runtime/philly_runtime.csv" ] || fail "claims did not fetch into the cache"
if grep -q "skipped:" "$work/claims.log"; then fail "claims skipped: $(grep skipped: "$work/claims.log")"; fi
grep -q "^C-PART" "$work/claims.log" || grep -q "C-PART" "$work/claims.log" || fail "no claim ran: $(tail -5 "$work/claims.log")"
echo "fetch_traces_test: all checks passed"
