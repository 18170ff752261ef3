#!/usr/bin/env bash
# Installs what gpupool needs to build and test: the Debian packages below (apt-get update, then
# apt-get install of the missing ones) and the browser tests' playwright-core (npm ci into
# tests/browser/node_modules). Idempotent: what is already present it only reports.
set -euo pipefail

PACKAGES=(
  cmake g++ make            # the build
  ccache                    # compiler cache: a rebuild (or a second clone's build) reuses unchanged objects
  time                      # make bench: wall time and peak memory of whole runs
  libgtest-dev libgmock-dev # unit, scenario and integration tests
  libbenchmark-dev          # make bench
  nlohmann-json3-dev        # JSON output and (later) the REST API's codec
  libcli11-dev              # command-line flags of the one binary
  libcsv-dev                # RFC 4180 CSV parsing of the trace files
  coinor-libclp-dev pkg-config  # LP solver for the share-packing prices of FGD+
  libyaml-cpp-dev           # scenario files (YAML)
  libssl-dev                # SHA-256 of event logs (libcrypto)
  libxxhash-dev             # XXH3-64: the engine snapshot's damage checksum
  libsqlite3-dev            # the server's durable state: event journal and snapshots (WAL)
  etcd-server etcd-client   # the replicated journal and leader election (server --etcd); tests start real members
  libcpp-httplib-dev        # the HTTP client of the CLI, the agent and the benchmarks
  libmicrohttpd-dev         # the daemons' HTTP server: epoll event loop, connection limits, suspend/resume, TLS
  libgnutls28-dev           # the TLS libmicrohttpd serves: src/http checks certificate files and client certificates with it
  openssl                   # the TLS tests make their certificates with the openssl command
  prometheus-cpp-dev        # /metrics: Prometheus registry and text exposition
  prometheus                # promtool: the tests lint the agent's DCGM-named exposition with it
  runc                      # the agent's OCI runtime: every task runs as an isolated container
  curl                      # scripts/fetch-traces.sh downloads the public traces (resumable)
  help2man lintian          # make package: man pages from the CLI's help; the package test lints the .deb
  python3                   # the FGD summary derived from the published results; the tests' loopback mirror
  chromium nodejs           # the web console's browser tests: playwright-core (npm ci in tests/browser) drives this Chromium
)

missing=()
# npm: Debian's own package, unless the installed nodejs brings npm with it (NodeSource's does, and conflicts with it).
command -v npm >/dev/null 2>&1 || PACKAGES+=(npm)
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

install_packages() {
  if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all ${#PACKAGES[@]} Debian packages are installed"
    return 0
  fi
  echo "install-deps: installing ${missing[*]}"
  local SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
      echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2
      exit 1
    fi
  fi
  echo "install-deps: apt-get update"
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
  echo "install-deps: Debian packages done"
}

# The browser tests' one npm package, playwright-core (no browser download: it drives the
# chromium above), installed as this user from tests/browser/package-lock.json into
# tests/browser/node_modules (ignored by git), only when that is not already the locked version.
# Test tooling only: the build never needs npm or the network. Without the registry this warns
# and goes on; ctest's console_browser then skips, saying why.
install_playwright() {
  local dir
  dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../tests/browser" && pwd)
  source "$dir/playwright-deps.sh"
  local want
  want=$(playwright_locked "$dir")
  if playwright_ready "$dir"; then
    echo "install-deps: playwright-core $want is installed in $dir/node_modules"
    return 0
  fi
  echo "install-deps: npm ci in $dir (playwright-core $want, for the browser tests)"
  if ! (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error); then
    echo "install-deps: WARNING: npm ci failed; the browser test console_browser will be skipped" >&2
  fi
}

install_packages
install_playwright
echo "install-deps: done"
