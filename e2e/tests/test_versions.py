"""`kfed-manager --version` and `kfed-agent --version` print the installed package's version (the charts'
appVersion and the image's tag)."""

from __future__ import annotations

import tomllib
from collections.abc import Callable

import pytest

from e2e.charts import REPO_ROOT
from manager.app import parse_args as manager_args
from worker_agent.app import parse_args as agent_args

VERSION = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]


@pytest.mark.parametrize(("parse", "prog"), [(manager_args, "kfed-manager"), (agent_args, "kfed-agent")])
def test_version_flag_prints_the_package_version(
    parse: Callable[[list[str]], object], prog: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"{prog} {VERSION}"
