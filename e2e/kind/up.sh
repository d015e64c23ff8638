#!/usr/bin/env bash
# kfed on three kind clusters (a manager and two workers), for users with Docker, in the README's order:
# image -> charts -> kubectl kfed add-worker -> queues. Every step is the one `python -m e2e.rig up --from-charts`
# runs on the test rig (e2e/rig/from_charts.py), except that here the Deployments really run.
#
#   e2e/kind/up.sh          # needs docker, kind, kubectl, helm; builds with `make image` (or IMAGE_ARCHIVE=...)
#   e2e/kind/down.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
WORKERS=${WORKERS:-2}
NODE_IMAGE=${KIND_NODE_IMAGE:-kindest/node:v1.36.0}
PY=.venv/bin/python

make venv
IMAGE_ARCHIVE=${IMAGE_ARCHIVE:-}
if [[ -z "$IMAGE_ARCHIVE" ]]; then
  make image
  IMAGE_ARCHIVE=$(ls dist/kfed-*.oci.tar | tail -1)
fi

kind create cluster --name kfed-manager --image "$NODE_IMAGE" --config e2e/kind/manager.yaml
for i in $(seq 1 "$WORKERS"); do
  kind create cluster --name "kfed-worker-$i" --image "$NODE_IMAGE" --config e2e/kind/worker.yaml
done
for cluster in kfed-manager $(seq -f "kfed-worker-%g" 1 "$WORKERS"); do
  kind load image-archive "$IMAGE_ARCHIVE" --name "$cluster"
done

# 1. The charts (CRDs, Deployments, RBAC; the manager chart also the Job admission policy).
helm install kfed-manager charts/kfed-manager --kube-context kind-kfed-manager -n kfed-system --create-namespace --wait
for i in $(seq 1 "$WORKERS"); do
  helm install kfed-agent charts/kfed-agent --kube-context "kind-kfed-worker-$i" -n kfed-system --create-namespace \
    --set clusterName="worker-$i" --wait
done

# 2. Join the workers: the manager's pods reach each worker's apiserver by its container name on kind's network.
for i in $(seq 1 "$WORKERS"); do
  .venv/bin/kubectl-kfed --context kind-kfed-manager add-worker "worker-$i" --worker-context "kind-kfed-worker-$i" \
    --worker-server "https://kfed-worker-$i-control-plane:6443" --multikueue-config kfed --wait 120
done

# 3. The AdmissionCheck and sample queues (the same objects as the rig's).
$PY -m e2e.rig.from_charts objects --manager | kubectl --context kind-kfed-manager apply -f -
for i in $(seq 1 "$WORKERS"); do
  $PY -m e2e.rig.from_charts objects | kubectl --context "kind-kfed-worker-$i" apply -f -
done

echo "kfed is up. Submit Jobs labelled kueue.x-k8s.io/queue-name: user-queue to kind-kfed-manager (see the README),"
echo "then: kubectl kfed --context kind-kfed-manager workloads -A"
