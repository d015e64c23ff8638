"""kfed's version, as installed (the package metadata of pyproject.toml), for `--version` and the charts' appVersion."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

PACKAGE = "kfed"


def package_version() -> str:
    """The installed kfed distribution's version; ``"unknown"`` when running from a tree that was never installed."""
    try:
        return version(PACKAGE)
    except PackageNotFoundError:
        return "unknown"
