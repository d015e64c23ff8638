"""kfed's shared library: the Kueue-compatible API, the pure admission and topology cores, and the Kubernetes edge."""
