"""Local federations on 127.0.0.1: one manager and N worker clusters of real Kubernetes binaries with kwok nodes.

`python -m e2e.rig up|down|status` drives it from a shell; :class:`e2e.rig.federation.Federation` backs the
pytest fixtures. Every process it starts is recorded in ``DIR/rig.json`` so ``down`` can stop it from anywhere.
"""
