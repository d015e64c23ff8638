"""Real Kubernetes binaries built from Go modules, because there is no Docker (and so no kind) here.

The pins live in :mod:`e2e.toolchain.pins`; :mod:`e2e.toolchain.build` turns them into binaries cached under a
versioned directory; :func:`bin_dir` tells every other piece of e2e where those binaries are. This package uses
only the standard library so it can run before the project's virtualenv exists.
"""

from e2e.toolchain.build import bin_dir, ensure_built

__all__ = ["bin_dir", "ensure_built"]
