#!/usr/bin/env bash
# gpupool node provider: creates one GPU node for a scale-out (server.provider.create in server.yaml).
# An example for AWS EC2 with the aws CLI; adapt the instance types, image and network to your account. Not run by
# gpupool's tests (no cloud there): read it, then try it by hand with the variables below set.
#
# The server runs it once per node asked for, as its own user, with (docs/server.md, "Scaling"):
#   GPUPOOL_POOL GPUPOOL_NODE GPUPOOL_RACK GPUPOOL_REGION GPUPOOL_ZONE GPUPOOL_GPU_MODEL GPUPOOL_GPUS GPUPOOL_WARM
# Exit 0 once the instance exists: the node joins its pool at once and its agent attaches when it registers as
# $GPUPOOL_NODE. Any other exit fails this node's request with the last lines of the output as the reason; the
# autoscaler may ask again after its cooldown. The server kills the script at server.provider.timeout.
set -euo pipefail
: "${GPUPOOL_NODE:?}" "${GPUPOOL_POOL:?}" "${GPUPOOL_ZONE:?}" "${GPUPOOL_GPU_MODEL:?}"

# The server's address as the new node sees it, and an admin token to issue the node's agent token.
server_url="${GPUPOOL_PUBLIC_URL:-http://gpupool.internal:7070}"
export GPUPOOL_ADDR="${GPUPOOL_ADDR:-http://127.0.0.1:7070}"
export GPUPOOL_TOKEN="${GPUPOOL_TOKEN:-$(cat /var/lib/gpupool/admin.token)}"

case "$GPUPOOL_GPU_MODEL" in
  L40S) instance_type=g6e.12xlarge ;;   # 4 x L40S
  H100) instance_type=p5.48xlarge ;;    # 8 x H100
  *) echo "create-node: no instance type for GPU model $GPUPOOL_GPU_MODEL" >&2; exit 2 ;;
esac
# A pre-initialised, stopped instance from the warm pool starts in seconds instead of minutes.
if [ "${GPUPOOL_WARM:-0}" = 1 ]; then
  warm=$(aws ec2 describe-instances --filters "Name=tag:gpupool-warm,Values=$GPUPOOL_POOL" \
           "Name=instance-state-name,Values=stopped" --query 'Reservations[0].Instances[0].InstanceId' --output text)
else
  warm=None
fi

node_token=$(gpupool node token "$GPUPOOL_NODE")   # printed once; the agent's only credential
# --insecure: the metrics listener serves plain HTTP on every interface (it carries readings, no credentials);
# give the agent --tls-cert/--tls-key to serve it over TLS instead, and an https:// GPUPOOL_PUBLIC_URL with --ca-cert.
user_data=$(cat <<USERDATA
#!/bin/sh
install -m 0600 /dev/null /etc/gpupool/node.token
printf '%s\n' '$node_token' > /etc/gpupool/node.token
cat > /etc/default/gpupool-agent <<AGENT
GPUPOOL_SERVER=$server_url
GPUPOOL_NODE=$GPUPOOL_NODE
GPUPOOL_TOKEN_FILE=/etc/gpupool/node.token
GPUPOOL_AGENT_ARGS=--region $GPUPOOL_REGION --zone $GPUPOOL_ZONE --rack $GPUPOOL_RACK --metrics-listen 0.0.0.0:9400 --insecure
AGENT
systemctl enable --now gpupool-agent
USERDATA
)

if [ "$warm" != None ] && [ -n "$warm" ]; then
  aws ec2 modify-instance-attribute --instance-id "$warm" --attribute userData --value "$(printf '%s' "$user_data" | base64 -w0)"
  aws ec2 create-tags --resources "$warm" --tags "Key=Name,Value=$GPUPOOL_NODE" "Key=gpupool-warm,Value="
  aws ec2 start-instances --instance-ids "$warm" >/dev/null
  echo "create-node: $GPUPOOL_NODE from warm instance $warm"
  exit 0
fi
aws ec2 run-instances --instance-type "$instance_type" --count 1 \
  --image-id "${GPUPOOL_AMI:?set GPUPOOL_AMI to an image with gpupool, the NVIDIA driver and runc}" \
  --placement "AvailabilityZone=$GPUPOOL_ZONE" --subnet-id "${GPUPOOL_SUBNET:?set GPUPOOL_SUBNET}" \
  --user-data "$user_data" \
  --tag-specifications "ResourceType=instance,Tags=[{Key=Name,Value=$GPUPOOL_NODE},{Key=gpupool-pool,Value=$GPUPOOL_POOL},{Key=gpupool-rack,Value=$GPUPOOL_RACK}]" \
  --query 'Instances[0].InstanceId' --output text
