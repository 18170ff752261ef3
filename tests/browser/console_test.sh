#!/usr/bin/env bash
# The web console's browser tests (tests/browser/console_test.mjs), run against the real binary
# in the system Chromium (Debian package `chromium`) through playwright-core, which
# scripts/install-deps.sh installs from tests/browser/package-lock.json into
# tests/browser/node_modules (`npm ci`; playwright-core downloads no browser). The test itself
# never reaches the network. Screenshots land in BUILD_DIR/console-screenshots.
#   console_test.sh GPUPOOL_BINARY SOURCE_DIR BUILD_DIR
# Exits 77 (skipped, with the reason) without node, chromium or the locked playwright-core,
# as the other tool-dependent tests do. GPUPOOL_CHROMIUM names another Chromium binary.
set -uo pipefail
bin=$1
dir=$(cd "$2/tests/browser" && pwd)
out=$3/console-screenshots
skip() { echo "console_browser: skipped: $*"; exit 77; }
command -v node >/dev/null || skip "needs node (scripts/install-deps.sh installs Debian's nodejs)"
browser=${GPUPOOL_CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
[ -n "$browser" ] && [ -x "$browser" ] || skip "needs chromium (scripts/install-deps.sh installs Debian's chromium)"
source "$dir/playwright-deps.sh"
playwright_ready "$dir" ||
  skip "needs playwright-core $(playwright_locked "$dir") in $dir/node_modules (run scripts/install-deps.sh)"
exec timeout 120 node "$dir/console_test.mjs" "$bin" "$out" "$browser"
