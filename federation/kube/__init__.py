"""The only package that talks to Kubernetes: clients from kubeconfigs, list+watch caches, retries, leases."""
