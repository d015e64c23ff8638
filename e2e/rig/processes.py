"""Start, record, find again and stop the rig's processes, so nothing outlives the rig.

Each process gets its own session (so a Ctrl-C in the shell that ran `up` does not kill the clusters) and is
recorded with its start time, so `down` never signals an unrelated process that reused the pid. Processes
started for a test also get PR_SET_PDEATHSIG, so they die with the test process even if it is killed -9.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_PR_SET_PDEATHSIG = 1


_LIBC = ctypes.CDLL(None, use_errno=True)


def _die_with_parent() -> None:
    # Runs in the forked child before exec: one libc call, no allocation, no locks (libc resolved above).
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def process_start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat), or None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[19])


@dataclass
class ProcessRecord:
    """What `down` needs to stop a process safely: pid, start time, name."""

    name: str
    pid: int
    start_ticks: int

    def cpu_seconds(self) -> float | None:
        """User + system CPU time so far (None once the process is gone)."""
        if not self.alive():
            return None
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def alive(self) -> bool:
        """Running (not a zombie) and still the process we started, not one that reused the pid."""
        return process_start_ticks(self.pid) == self.start_ticks and not _is_zombie(self.pid)

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "pid": self.pid, "start_ticks": self.start_ticks}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> ProcessRecord:
        return cls(name=str(data["name"]), pid=int(str(data["pid"])), start_ticks=int(str(data["start_ticks"])))


def start_process(
    name: str,
    argv: list[str],
    *,
    log_path: Path,
    die_with_parent: bool,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
) -> tuple[subprocess.Popen[bytes], ProcessRecord]:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent if die_with_parent else None,  # noqa: PLW1509 - only prctl, see above
            env=env,
            cwd=cwd,
        )
    ticks = process_start_ticks(proc.pid)
    return proc, ProcessRecord(name=name, pid=proc.pid, start_ticks=ticks if ticks is not None else -1)


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    """How a running process was started (read from /proc), to start it again the same way."""

    argv: list[str]
    env: dict[str, str]
    cwd: str


def launch_spec(record: ProcessRecord) -> LaunchSpec:
    proc = Path(f"/proc/{record.pid}")
    argv = [part.decode() for part in (proc / "cmdline").read_bytes().split(b"\0")[:-1]]
    env = dict(entry.decode().split("=", 1) for entry in (proc / "environ").read_bytes().split(b"\0") if b"=" in entry)
    return LaunchSpec(argv=argv, env=env, cwd=os.readlink(proc / "cwd"))


def stop_records(records: list[ProcessRecord], *, grace_seconds: float = 10.0) -> list[str]:
    """SIGTERM every live process, SIGKILL what is left after the grace period; returns names still alive."""
    live = [r for r in records if r.alive()]
    for record in live:
        with contextlib.suppress(ProcessLookupError):
            os.kill(record.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_seconds
    while time.monotonic() < deadline and any(r.alive() for r in live):
        time.sleep(0.05)
    for record in live:
        if record.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(record.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(r.alive() for r in live):
        time.sleep(0.05)
    return [r.name for r in live if r.alive()]


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


@contextlib.contextmanager
def paused(record: ProcessRecord) -> Iterator[None]:
    """Freeze a process (SIGSTOP) for the block and let it go on afterwards (SIGCONT, also on failure): to its
    peers it stops answering while its connections stay open, the hardest outage to notice."""
    os.kill(record.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(record.pid, signal.SIGCONT)
