"""End-to-end support for kfed: the real Kubernetes toolchain, the local rig, e2e tests and benchmarks."""
