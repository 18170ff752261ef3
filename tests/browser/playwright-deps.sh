#!/usr/bin/env bash
# Sourced by scripts/install-deps.sh and tests/browser/console_test.sh: whether
# tests/browser/node_modules holds the playwright-core that package-lock.json pins.
#   playwright_ready DIR   exit status 0 when DIR/node_modules/playwright-core is the
#                          locked version; needs node. Prints nothing.
#   playwright_locked DIR  prints the locked version.
playwright_locked() {
  node -e 'const l = require(process.argv[1] + "/package-lock.json");
           process.stdout.write(l.packages["node_modules/playwright-core"].version)' "$1"
}
playwright_ready() {
  local want have
  want=$(playwright_locked "$1" 2>/dev/null) || return 1
  have=$(node -e 'process.stdout.write(require(process.argv[1] + "/node_modules/playwright-core/package.json").version)' \
    "$1" 2>/dev/null) || return 1
  [ -n "$want" ] && [ "$want" = "$have" ]
}
