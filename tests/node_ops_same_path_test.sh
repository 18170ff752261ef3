#!/bin/bash
# Issue 19: a scenario's node_ops drain (gpupool sim run) and an operator's
# drain through the server (gpupool node drain) reach the same Engine path:
# a node running one job that cannot move, drained with a zero timeout,
# gives the same events in the same order in both (who asked aside).
# Usage: node_ops_same_path_test.sh PATH_TO_GPUPOOL
set -euo pipefail
B=$1
SP=
D=$(mktemp -d)
trap '[ -n "$SP" ] && kill $SP 2>/dev/null; rm -rf $D' EXIT
cat > $D/sim.yaml <<'Y'
name: same-shell
seed: 1
horizon: 3h
engine: {policy: best, tick: 30s}
cluster:
  nodes:
    - {count: 2, name_prefix: gpu, model: H100, gpus: 1, cpu_cores: 16, memory_gib: 64}
pools:
  - {name: gpu, models: [H100]}
tenants:
  - {name: team, quota: {gpu: {guaranteed_gpus: 0, limit_gpus: 2}}}
workload:
  - tenant: team
    arrivals: {process: poisson, rate_per_hour: 600, stop: 1m}
    jobs:
      - {name: stuck, gpus: 1, checkpointable: false, duration: {fixed: 10h}}
node_ops:
  - {node: gpu-0, at: 1h, action: drain, timeout: 0s, reason: same shell}
Y
"$B" sim run $D/sim.yaml --event-log $D/sim.jsonl > /dev/null
python3 - "$D/sim.jsonl" > $D/sim.seq <<'P'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
i = next(k for k, e in enumerate(ev) if e["type"] == "NodeDrainRequested")
for e in ev[i:i+4]:
    print(e["type"], e.get("reason", ""), e.get("checkpoint", ""), e.get("timeout_ms", ""), e.get("lost_work_ms", "-") != "-")
P
cat > $D/server.yaml <<'Y'
name: same-shell
engine: {heartbeat_timeout: 0s, policy: BestFit}
pools:
  - {name: gpu, models: [H100]}
cluster:
  nodes:
    - {count: 2, name_prefix: gpu, model: H100, gpus: 1, cpu_cores: 16, memory_gib: 64}
server: {tick: 100ms}
Y
"$B" server --data $D/data --config $D/server.yaml --listen 127.0.0.1:0 > $D/server.log 2>&1 &
SP=$!
for _ in $(seq 100); do [ -f $D/data/server.url ] && break; sleep 0.1; done
export GPUPOOL_ADDR=$(cat $D/data/server.url) GPUPOOL_TOKEN=$(cat $D/data/admin.token)
"$B" tenant create team --pool gpu --guaranteed 0 --limit 2 > /dev/null
printf 'name: stuck\ngpus: 1\ncpu_cores: 1\nmemory_gib: 1\ncheckpointable: false\nimage: host\ncommand: [sleep, "1000"]\n' > $D/job.yaml
"$B" job submit -f $D/job.yaml --tenant team > /dev/null
for _ in $(seq 100); do
  NODE=$("$B" job get 1 -o json | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["placements"][0]["node"] if j["state"]=="running" else "")')
  [ -n "$NODE" ] && break; sleep 0.1
done
[ -n "$NODE" ] || { echo "job 1 never ran"; cat $D/server.log; exit 1; }
"$B" node drain $NODE --timeout 0s --reason "same shell" > /dev/null
"$B" node get $NODE -o json | python3 -c 'import json,sys; sys.exit(json.load(sys.stdin)["cordons"][0]["drain"] != "drained")' ||
  { echo "node $NODE not drained"; exit 1; }
python3 - > $D/server.json <<'P'
import os, urllib.request
r = urllib.request.Request(os.environ["GPUPOOL_ADDR"] + "/v1/events?limit=1000",
                           headers={"Authorization": "Bearer " + os.environ["GPUPOOL_TOKEN"]})
print(urllib.request.urlopen(r).read().decode())
P
python3 - "$D/server.json" > $D/server.seq <<'P'
import json, sys
ev = json.load(open(sys.argv[1]))["events"]
i = next(k for k, e in enumerate(ev) if e["type"] == "NodeDrainRequested")
for e in ev[i:i+4]:
    print(e["type"], e.get("reason", ""), e.get("checkpoint", ""), e.get("timeout_ms", ""), e.get("lost_work_ms", "-") != "-")
P
echo "--- sim (node_ops)"; cat $D/sim.seq
echo "--- server (gpupool node drain)"; cat $D/server.seq
[ "$(wc -l < $D/sim.seq)" = 4 ] || { echo "the scenario's drain gave too few events"; exit 1; }
diff $D/sim.seq $D/server.seq
echo "same: the scenario's drain and the API's drain emit the same events"
