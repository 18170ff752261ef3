#!/usr/bin/env bash
# gpupool node provider: deletes one node a scale-in removed (server.provider.delete in server.yaml).
# An example for AWS EC2 with the aws CLI, the counterpart of create-node.sh; not run by gpupool's tests.
# The server runs it with GPUPOOL_NODE and GPUPOOL_POOL once the node was drained (no task left on it) and removed.
# A failure is only logged: the node has already left its pool; delete the instance by hand then.
set -euo pipefail
: "${GPUPOOL_NODE:?}"
ids=$(aws ec2 describe-instances --filters "Name=tag:Name,Values=$GPUPOOL_NODE" \
        "Name=instance-state-name,Values=pending,running,stopping,stopped" \
        --query 'Reservations[].Instances[].InstanceId' --output text)
if [ -z "$ids" ]; then
  echo "delete-node: no instance named $GPUPOOL_NODE (already gone)"
  exit 0
fi
# shellcheck disable=SC2086  # one or more ids, split on purpose
aws ec2 terminate-instances --instance-ids $ids --query 'TerminatingInstances[].InstanceId' --output text
