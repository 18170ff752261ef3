#!/usr/bin/env bash
# FGD and FGD+ on every openb pod list under the FGD protocol, seeds 42-51, with the target
# workload built from the whole pod list (the paper's setup) and learned from the pods as they
# arrive (as the daemon learns it): one line per workload, target and policy with the seed mean of
# unallocated GPU % at 100% arrival.
#
#   scripts/fgd-targets.sh [GPUPOOL_BINARY] [TRACE_DIR]
set -euo pipefail
bin=${1:-build/gpupool}
traces=${2:-${GPUPOOL_TRACES:-../shared/traces}/alibaba-gpu-2023}
if [ ! -f "$traces/openb_node_list_gpu_node.csv" ]; then
  echo "$traces: no openb trace here (make traces fetches it)" >&2
  exit 2
fi
printf "%-24s %-9s %-5s %s\n" workload target policy unallocated_pct_at_100
for pods in "$traces"/openb_pod_list_*.csv; do
  workload=$(basename "$pods" .csv)
  for target in pod-list learned; do
    "$bin" sim fgd --nodes "$traces/openb_node_list_gpu_node.csv" --pods "$pods" --policy FGD,FGD+ \
      --seeds 42-51 --target "$target" --json |
      python3 -c 'import json, sys
for r in json.load(sys.stdin):
    print("%-24s %-9s %-5s %.2f" % (sys.argv[1], sys.argv[2], r["policy"], r["unallocated_pct_at_100"]))' \
        "${workload#openb_pod_list_}" "$target"
  done
done
