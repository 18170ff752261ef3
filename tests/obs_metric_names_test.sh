#!/usr/bin/env bash
# Every metric the observability pack names is one gpupool really exports (issue 19):
#   1. starts `gpupool dev` (a server and one agent with fake GPUs, its metrics listener on a free port), submits a
#      job, and scrapes the server's /metrics and the agent's DCGM-named /metrics;
#   2. tests/obs_metric_names.py extracts the metric names of every query of deploy/grafana/gpupool-dashboard.json
#      and every expression of deploy/prometheus/gpupool-alerts.yaml and fails on one neither exposition has
#      (families by their TYPE lines, histograms' _bucket/_sum/_count);
#   3. the same check on a copy of the dashboard with one query naming a metric nobody exports must fail, so the
#      check cannot pass vacuously;
#   4. with promtool, the dashboard's queries (Grafana's variables replaced) are valid PromQL.
#   obs_metric_names_test.sh GPUPOOL_BINARY SOURCE_DIR
# Exits 77 (skipped) without python3 or curl.
set -uo pipefail
bin=$1
src=$(cd "$2" && pwd)
skip() { echo "obs_metric_names: skipped: $*"; exit 77; }
fail() { echo "obs_metric_names: FAIL: $*" >&2; [ -f "${work:-}/dev.err" ] && tail -20 "$work/dev.err" >&2; exit 1; }
command -v python3 >/dev/null || skip "needs python3"
command -v curl >/dev/null || skip "needs curl"

work=$(mktemp -d)
dev_pid=
cleanup() {
  if [ -n "$dev_pid" ]; then kill -TERM "$dev_pid" 2>/dev/null; wait "$dev_pid" 2>/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT

# 1. A dev server and its agent.
GPUPOOL_LOG_REQUESTS=0 "$bin" dev --data "$work/data" --listen 127.0.0.1:0 >"$work/dev.out" 2>"$work/dev.err" &
dev_pid=$!
server= agent=
for _ in $(seq 1 200); do
  server=$(sed -n 's/^  address: *\(http:[^ ]*\).*/\1/p' "$work/dev.out")
  agent=$(sed -n 's/^  metrics: *\(http:[^ ]*\).*/\1/p' "$work/dev.out")
  [ -n "$server" ] && [ -n "$agent" ] && break
  kill -0 "$dev_pid" 2>/dev/null || fail "gpupool dev exited: $(cat "$work/dev.out")"
  sleep 0.05
done
[ -n "$server" ] && [ -n "$agent" ] || fail "gpupool dev printed no address and metrics URL: $(cat "$work/dev.out")"
token=$(cat "$work/data/tokens/team-a.token") || fail "no team-a token"
curl -sf -o /dev/null -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
  -d '{"name": "probe", "gpu_fraction": 0.5, "cpu_cores": 1, "memory_gib": 1, "command": ["sleep", "60"]}' "$server/v1/jobs" \
  || fail "cannot submit a job to $server"
# Wait for the agent's first heartbeat (the server then has per-GPU utilization) and its first device reading.
# The agent's listener answers once it has read its GPUs.
for _ in $(seq 1 100); do
  curl -sf "$server/metrics" >"$work/server.prom" 2>/dev/null && curl -sf "$agent" >"$work/agent.prom" 2>/dev/null &&
    grep -q '^gpupool_gpu_reported_utilization_percent{' "$work/server.prom" &&
    grep -q '^DCGM_FI_DEV_GPU_UTIL{' "$work/agent.prom" && break
  kill -0 "$dev_pid" 2>/dev/null || fail "gpupool dev exited"
  sleep 0.1
done
[ -s "$work/server.prom" ] || fail "cannot scrape $server/metrics"
[ -s "$work/agent.prom" ] || fail "cannot scrape $agent"
grep -q '^# TYPE gpupool_' "$work/server.prom" || fail "the server's /metrics has no gpupool_ family"
grep -q '^# TYPE DCGM_FI_' "$work/agent.prom" || fail "the agent's /metrics has no DCGM_FI_ family"

# 2. The pack against both expositions.
check() {
  python3 "$src/tests/obs_metric_names.py" --exposition "$work/server.prom" --exposition "$work/agent.prom" \
    --dashboard "$1" --rules "$src/deploy/prometheus/gpupool-alerts.yaml" --promql-out "$work/queries.yaml"
}
check "$src/deploy/grafana/gpupool-dashboard.json" || fail "the pack names metrics nobody exports (above)"

# 4 (before 3 overwrites the file). The queries' syntax.
if command -v promtool >/dev/null; then
  out=$(promtool check rules "$work/queries.yaml" 2>&1) || fail "a dashboard query is not valid PromQL: $out"
else
  echo "obs_metric_names: promtool not found: the queries' syntax is not checked"
fi

# 3. A bogus name must fail.
python3 - "$src/deploy/grafana/gpupool-dashboard.json" "$work/bogus.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
p = next(p for p in d["panels"] if p.get("targets"))
p["targets"][0]["expr"] = 'sum(rate(gpupool_no_such_metric_total{pool=~"$pool"}[$__rate_interval]))'
json.dump(d, open(sys.argv[2], "w"))
EOF
if check "$work/bogus.json" 2>"$work/bogus.err"; then fail "a query naming gpupool_no_such_metric_total passed"; fi
grep -q 'gpupool_no_such_metric_total is exported by neither' "$work/bogus.err" \
  || fail "the bogus query failed for another reason: $(cat "$work/bogus.err")"
echo "obs_metric_names: OK (a bogus metric name is caught)"
