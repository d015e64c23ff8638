#!/usr/bin/env bash
# Delete the kind clusters e2e/kind/up.sh made.
set -euo pipefail
for cluster in $(kind get clusters | grep -E '^kfed-(manager|worker-[0-9]+)$'); do
  kind delete cluster --name "$cluster"
done
