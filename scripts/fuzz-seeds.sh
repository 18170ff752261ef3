#!/usr/bin/env bash
# The seed corpus of one fuzz target, for scripts/fuzz.sh (libFuzzer) and
# tests/fuzz_replay_test.sh (make test): fuzz/seeds/TARGET/ (committed, with
# every input a fuzzer ever found), plus files of the repository that the
# target's parser reads.
#
#   scripts/fuzz-seeds.sh TARGET DIR      (DIR is emptied first)
set -euo pipefail
cd "$(dirname "$0")/.."
target="$1" dir="$2"

# pem_fuzz's input form: the certificate's length (two bytes, little-endian),
# the certificate, then the key.
pem_seed() {
  perl -e 'print pack("v", -s $ARGV[0])' "$1"
  cat "$1" "$2"
}

rm -rf "$dir"; mkdir -p "$dir"
if [ -d "fuzz/seeds/$target" ]; then cp fuzz/seeds/"$target"/* "$dir"/; fi
case "$target" in
  event_line_fuzz) split -l 1 -d -a 3 tests/fixtures/events/every_type.jsonl "$dir/line-" ;;
  event_binary_fuzz)  # one event of every type, from the pinned binary fixture (one hex line each)
    n=0
    while read -r hex; do
      perl -e 'print pack("H*", $ARGV[0])' "$hex" > "$dir/type-$n.bin"
      n=$((n + 1))
    done < tests/fixtures/events/every_type.binary.hex ;;
  read_model_fuzz | snapshot_fuzz) ;;  # fuzz/seeds: the snapshots of the committed data-directory fixtures
  scenario_fuzz) find scenarios -name '*.yaml' -exec cp --backup=numbered {} "$dir"/ \; ;;
  server_config_fuzz) cp examples/production/server.yaml "$dir"/ ;;
  job_file_fuzz) cp examples/*.yaml "$dir"/ ;;
  pem_fuzz)
    # A fresh pair each run (no private key is committed): a matching EC
    # pair, an RSA pair, and the RSA certificate with the EC key.
    tmp="$(mktemp -d)"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=seed \
      -keyout "$tmp/ec.key" -out "$tmp/ec.crt" 2>/dev/null
    openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=seed -addext subjectAltName=IP:127.0.0.1 \
      -keyout "$tmp/rsa.key" -out "$tmp/rsa.crt" 2>/dev/null
    pem_seed "$tmp/ec.crt" "$tmp/ec.key" > "$dir/ec-pair"
    pem_seed "$tmp/rsa.crt" "$tmp/rsa.key" > "$dir/rsa-pair"
    pem_seed "$tmp/rsa.crt" "$tmp/ec.key" > "$dir/mismatched"
    rm -rf "$tmp" ;;
  trace_csv_fuzz)
    traces="${GPUPOOL_TRACES:-../shared/traces}/alibaba-gpu-2023"
    if [ -f "$traces/openb_pod_list_default.csv" ]; then
      head -c 4000 "$traces/openb_pod_list_default.csv" > "$dir/pods.csv"
      head -c 4000 "$traces/openb_node_list_gpu_node.csv" > "$dir/nodes.csv"
    fi ;;
esac
