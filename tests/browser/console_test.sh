#!/usr/bin/env bash
# The web console's browser tests (tests/browser/console_test.mjs): installs playwright-core from
# tests/browser/package-lock.json with `npm ci` when node_modules is missing or older than the lock file,
# then runs the test against the real binary with the system Chromium (Debian package `chromium`;
# playwright-core downloads no browser). Screenshots land in BUILD_DIR/console-screenshots.
#   console_test.sh GPUPOOL_BINARY SOURCE_DIR BUILD_DIR
# Exits 77 (skipped) without node, npm or chromium, as the other tool-dependent tests do
# (scripts/install-deps.sh installs all three).
set -uo pipefail
bin=$1
dir=$(cd "$2/tests/browser" && pwd)
out=$3/console-screenshots
skip() { echo "console_browser: skipped: $*"; exit 77; }
command -v node >/dev/null || skip "needs node (apt-get install nodejs npm)"
command -v npm >/dev/null || skip "needs npm (apt-get install npm)"
browser=${GPUPOOL_CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
[ -n "$browser" ] || skip "needs chromium (apt-get install chromium)"
if [ ! -f "$dir/node_modules/playwright-core/package.json" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) || { echo "console_browser: FAIL: npm ci in $dir" >&2; exit 1; }
fi
exec timeout 120 node "$dir/console_test.mjs" "$bin" "$out" "$browser"
