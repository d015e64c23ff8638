"""Headless Debian Chromium for the dashboard test, driven over the DevTools protocol (no driver, no npm).

``ensure_chromium`` installs Debian's ``chromium`` package with apt-get when it is missing (the fresh-machine rule:
``make test`` sets up what it needs). :class:`Browser` starts Chromium with the flags this machine needs (no
sandbox as root, no GPU, no background networking: its connections would be refused here) and a fresh profile,
opens pages, evaluates JavaScript in them and takes screenshots; the process is stopped on exit, also on failure.
"""

from __future__ import annotations

import asyncio
import base64
import fcntl
import itertools
import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,1000",
)


class BrowserError(RuntimeError):
    pass


def ensure_chromium() -> Path:
    """Debian's Chromium, installed with apt-get (under a lock: tests may ask at once) when it is not there yet."""
    if CHROMIUM.exists():
        return CHROMIUM
    apt = shutil.which("apt-get")
    if apt is None:
        raise BrowserError(f"{CHROMIUM} is missing and there is no apt-get to install Debian's chromium package")
    with open("/tmp/kfed-chromium-install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not CHROMIUM.exists():
            for args in ([apt, "update", "-q"], [apt, "install", "-y", "-q", "--no-install-recommends", "chromium"]):
                result = subprocess.run(args, capture_output=True, text=True, timeout=900, check=False)
                if result.returncode != 0 and args[1] == "install":
                    raise BrowserError(f"apt-get install chromium failed:\n{result.stdout[-2000:]}{result.stderr}")
    if not CHROMIUM.exists():
        raise BrowserError(f"apt-get installed chromium but {CHROMIUM} is not there")
    return CHROMIUM


class Page:
    """One tab; every call opens its own DevTools connection (Chromium allows several per target)."""

    def __init__(self, ws_url: str) -> None:
        self._ws_url = ws_url
        self._ids = itertools.count(1)

    def call(self, method: str, params: dict[str, Any] | None = None, *, timeout: float = 30) -> dict[str, Any]:
        return asyncio.run(self._call(method, params or {}, timeout))

    async def _call(self, method: str, params: dict[str, Any], seconds: float) -> dict[str, Any]:
        ident = next(self._ids)
        async with aiohttp.ClientSession() as session, session.ws_connect(self._ws_url, max_msg_size=0) as ws:
            await ws.send_str(json.dumps({"id": ident, "method": method, "params": params}))
            async with asyncio.timeout(seconds):
                async for message in ws:
                    data = json.loads(message.data)
                    if data.get("id") == ident:
                        if "error" in data:
                            raise BrowserError(f"{method}: {data['error']}")
                        return dict(data.get("result") or {})
        raise BrowserError(f"{method}: the DevTools connection closed without an answer")

    def eval(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return (result.get("result") or {}).get("value")

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path


class Browser:
    def __init__(self, executable: Path, profile: Path) -> None:
        self._executable = executable
        self._profile = profile
        self._process: subprocess.Popen[bytes] | None = None
        self._port = 0

    def __enter__(self) -> Browser:
        self._profile.mkdir(parents=True, exist_ok=True)
        (self._profile / "DevToolsActivePort").unlink(missing_ok=True)  # a reused profile's would be stale
        log = (self._profile.parent / "chromium.log").open("wb")
        self._process = subprocess.Popen(
            [
                str(self._executable),
                *FLAGS,
                f"--user-data-dir={self._profile}",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                "about:blank",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        active = self._profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not active.exists() or not active.read_text().strip():
            if self._process.poll() is not None:
                raise BrowserError(f"chromium exited ({self._process.returncode}); see {log.name}")
            if time.monotonic() > deadline:
                raise BrowserError("chromium did not open its DevTools port within 60 s")
            time.sleep(0.1)
        self._port = int(active.read_text().splitlines()[0])
        return self

    def __exit__(self, *exc: tuple[type[BaseException] | None, BaseException | None, TracebackType | None]) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=10)

    def open(self, url: str) -> Page:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self._port}/json/new?{urllib.parse.quote(url, safe='')}", method="PUT"
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            target = json.loads(response.read())
        return Page(str(target["webSocketDebuggerUrl"]))
