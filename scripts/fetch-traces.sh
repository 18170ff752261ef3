#!/usr/bin/env bash
# Downloads the public traces gpupool's simulator and claims use, verifies each against the SHA-256 committed in
# scripts/traces/manifest.tsv, and unpacks them into a traces folder. Run with --help for the details.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# In the source tree the manifest is beside this script; installed (as gpupool-fetch-traces), in share/gpupool.
data="$here/traces"
[ -d "$data" ] || data="$here/../share/gpupool/traces"
manifest="${GPUPOOL_TRACES_MANIFEST:-$data/manifest.tsv}"
derive="$data/derive-fgd-summary.py"
base_url="${GPUPOOL_TRACES_BASE_URL:-https://raw.githubusercontent.com}"
connect_timeout_s=10
max_seconds_per_file=900

usage() {
  cat <<EOF
usage: fetch-traces.sh [--base-url URL] [--check] [DIR]   (installed as gpupool-fetch-traces)

Fetches every public trace gpupool uses (the Alibaba GPU 2023 "openb" cluster and pod lists with the FGD authors'
cached results, the Alibaba DLRM 2025 serving trace, the Alibaba GenAI 2026 GPU utilization series, and the Philly
run times) into DIR, verifies each file's SHA-256 against scripts/traces/manifest.tsv, and writes DIR/README.md
naming each source, its pinned revision and its licence.

  DIR            where to put them (default: \$GPUPOOL_TRACES when set, else ~/.cache/gpupool/traces, which is
                 where gpupool looks last: \$GPUPOOL_TRACES, then ../shared/traces, then the cache)
  --base-url URL where the sources are served, in raw.githubusercontent.com's layout (OWNER/REPO/COMMIT/PATH);
                 default \$GPUPOOL_TRACES_BASE_URL, else https://raw.githubusercontent.com. Use it for a mirror.
  --check        download nothing: verify what DIR holds and list what is missing or damaged (exit 1 if any)

Every source is pinned to a commit. Files published as they are used are checked by their own SHA-256; files the
project extracts from an archive or computes (the FGD summary, with python3) are extracted or computed here and the
result is checked. Partial downloads are kept in DIR/.partial and resumed; a file that fails its checksum is deleted
and reported, never installed. Running it again fetches only what is missing.

The public sources cannot be reached from gpupool's build machines: there, only a loopback mirror of them is
tested (tests/fetch_traces_test.sh). Needs curl, tar, sha256sum, and python3 for the derived summary.
EOF
}

die() { echo "fetch-traces: $*" >&2; exit 1; }

check_only=0
dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --base-url) [ $# -ge 2 ] || die "--base-url needs a URL"; base_url="$2"; shift 2 ;;
    --base-url=*) base_url="${1#--base-url=}"; shift ;;
    --check) check_only=1; shift ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) [ -z "$dir" ] || die "one DIR only (got '$dir' and '$1')"; dir="$1"; shift ;;
  esac
done
if [ -z "$dir" ]; then
  if [ -n "${GPUPOOL_TRACES:-}" ]; then dir="$GPUPOOL_TRACES"; else dir="${XDG_CACHE_HOME:-$HOME/.cache}/gpupool/traces"; fi
fi
base_url="${base_url%/}"
[ -r "$manifest" ] || die "cannot read the manifest $manifest"
for tool in sha256sum tar; do command -v "$tool" >/dev/null || die "needs $tool"; done
if [ "$check_only" = 0 ]; then command -v curl >/dev/null || die "needs curl (Debian: apt-get install curl)"; fi

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

# A folder that already holds every file is only read (it may be read-only, like a shared copy).
complete=1
while IFS=$'\t' read -r dest sha _; do
  case "$dest" in ''|'#'*) continue ;; esac
  if [ ! -f "$dir/$dest" ] || [ "$(sha_of "$dir/$dest")" != "$sha" ]; then complete=0; break; fi
done <"$manifest"
if [ "$complete" = 1 ]; then
  echo "fetch-traces: $dir: every trace is there and verified"
  exit 0
fi

mkdir -p "$dir/.partial" || die "cannot create $dir"
exec 9>"$dir/.lock"
flock -n 9 || die "another fetch-traces.sh is working in $dir"
# url_of SOURCE: OWNER/REPO@COMMIT:PATH[#MEMBER] -> BASE/OWNER/REPO/COMMIT/PATH
url_of() {
  local s="${1%%#*}" repo commit path
  repo="${s%%@*}"; s="${s#*@}"; commit="${s%%:*}"; path="${s#*:}"
  echo "$base_url/$repo/$commit/$path"
}

# download URL FILE: fetches URL into FILE, resuming a partial FILE. Exits at once when the host cannot be reached.
download() {
  local url="$1" out="$2" rc=0
  mkdir -p "$(dirname "$out")"
  curl --fail --silent --show-error --location --connect-timeout "$connect_timeout_s" --max-time "$max_seconds_per_file" \
    --retry 2 --retry-connrefused --continue-at - --output "$out" "$url" || rc=$?
  case "$rc" in
    0) return 0 ;;
    6|7|28) die "cannot reach $url (curl exit $rc): offline? Set GPUPOOL_TRACES_BASE_URL (or --base-url) to a mirror, or copy the traces into $dir" ;;
    33) rm -f "$out"; download "$url" "$out" ;;  # the server cannot resume: start over once
    *) rm -f "$out"; echo "fetch-traces: $url: download failed (curl exit $rc)" >&2; return 1 ;;
  esac
}

# install_checked SRC DEST SHA: moves SRC to DEST when its SHA-256 is SHA; otherwise deletes it and fails.
install_checked() {
  local src="$1" dest="$2" want="$3" got
  got=$(sha_of "$src")
  if [ "$got" != "$want" ]; then
    rm -f "$src"
    echo "fetch-traces: $dest: checksum mismatch (expected $want, got $got): not installed; run again to retry" >&2
    return 1
  fi
  mkdir -p "$(dirname "$dir/$dest")"
  mv -f "$src" "$dir/$dest"
  chmod 0644 "$dir/$dest"
}

fetch_file() {  # DEST SHA SOURCE
  local part="$dir/.partial/$1.part"
  download "$(url_of "$3")" "$part" || return 1
  install_checked "$part" "$1" "$2"
}

fetch_member() {  # DEST SHA SOURCE (OWNER/REPO@COMMIT:ARCHIVE#MEMBER)
  local member="${3##*#}" archive="$dir/.partial/${3%%#*}" entry out="$dir/.partial/$1.part"
  archive="${archive//@/_}"; archive="${archive//:/_}"
  [ -s "$archive.done" ] || { download "$(url_of "$3")" "$archive" && mv -f "$archive" "$archive.done"; } || return 1
  entry=$(tar -tzf "$archive.done" 2>/dev/null | awk -v m="$member" '{ n = $0; sub(".*/", "", n) } n == m { print; exit }') || true
  if [ -z "$entry" ]; then
    rm -f "$archive.done"
    echo "fetch-traces: $1: the archive $(url_of "$3") has no member $member (or is damaged): deleted; run again" >&2
    return 1
  fi
  mkdir -p "$(dirname "$out")"
  tar -xzOf "$archive.done" "$entry" >"$out" || { rm -f "$out" "$archive.done"; echo "fetch-traces: $1: cannot extract $entry" >&2; return 1; }
  install_checked "$out" "$1" "$2" || { rm -f "$archive.done"; return 1; }
  rm -f "$archive.done"
}

derive_file() {  # DEST SHA
  local out="$dir/.partial/$1.part"
  command -v python3 >/dev/null || { echo "fetch-traces: $1: needs python3 to compute it from the FGD results" >&2; return 1; }
  mkdir -p "$(dirname "$out")"
  python3 "$derive" "$dir/$(dirname "$1")" >"$out" || { rm -f "$out"; echo "fetch-traces: $1: computing it failed" >&2; return 1; }
  install_checked "$out" "$1" "$2"
}

write_readme() {
  cat >"$dir/README.md" <<'EOF'
# Public traces for gpupool

Fetched and verified by gpupool's `scripts/fetch-traces.sh` (checksums in `scripts/traces/manifest.tsv`).
Data only; cite the papers below when you publish results computed from them.

| folder | source (pinned) | licence |
|---|---|---|
| `alibaba-gpu-2023/` | `alibaba/clusterdata` at `7a6c496e4f4b6ce6150be8f881cb051bf2abff42`, `cluster-trace-gpu-v2023/csv/` (Weng et al., "Beware of Fragmentation", USENIX ATC '23) | no licence file; the repository's README allows research and study use |
| `alibaba-gpu-2023/fgd-expected-results/analysis_*.csv` | `hkust-adsl/kubernetes-scheduler-simulator` at `8f3d6417353c5083c6d56617f255fadd8dc306bc`, `experiments/analysis/expected_results/` (the FGD authors' cached results) | Apache-2.0 |
| `alibaba-gpu-2023/fgd-expected-results/fgd_policy_summary.csv` | computed by gpupool from the three files above (means over the 10 seeds) | as its inputs |
| `alibaba-dlrm-2025/` | `alibaba/clusterdata` at `7a6c496e...`, `cluster-trace-gpu-v2025/` (Yang et al., NSDI '25) | no licence file; research and study use |
| `alibaba-genai-2026-gpu-util/` | `alibaba/clusterdata` at `7a6c496e...`, `cluster-trace-v2026-GenAI/*.tar.gz`, extracted (SoCC '25, EuroSys '26) | no licence file; research and study use |
| `philly-runtime/` | `alibaba/clusterdata` at `7a6c496e...`, `cluster-trace-gpu-v2020/analysis/philly_runtime.csv` (Philly: Jeon et al., ATC '19; Alibaba PAI, NSDI '22) | CC BY 4.0 |
EOF
}

fetched=0 ok=0 failed=0 missing=0
while IFS=$'\t' read -r dest sha kind source; do
  case "$dest" in ''|'#'*) continue ;; esac
  if [ -f "$dir/$dest" ] && [ "$(sha_of "$dir/$dest")" = "$sha" ]; then ok=$((ok + 1)); continue; fi
  if [ "$check_only" = 1 ]; then
    if [ -f "$dir/$dest" ]; then echo "damaged: $dest (checksum differs)"; else echo "missing: $dest"; fi
    missing=$((missing + 1)); continue
  fi
  [ -f "$dir/$dest" ] && echo "fetch-traces: $dest: checksum differs from the manifest: fetching it again" >&2
  echo "fetch-traces: $dest"
  case "$kind" in
    file) fetch_file "$dest" "$sha" "$source" ;;
    tar.gz) fetch_member "$dest" "$sha" "$source" ;;
    derived) derive_file "$dest" "$sha" ;;
    *) echo "fetch-traces: $manifest: $dest: unknown kind '$kind'" >&2; false ;;
  esac && fetched=$((fetched + 1)) || failed=$((failed + 1))
done <"$manifest"

if [ "$check_only" = 1 ]; then
  echo "fetch-traces: $dir: $ok verified, $missing missing or damaged"
  [ "$missing" = 0 ]; exit
fi
[ "$failed" = 0 ] && write_readme
echo "fetch-traces: $dir: $ok already there, $fetched fetched, $failed failed"
[ "$failed" = 0 ] || exit 1
