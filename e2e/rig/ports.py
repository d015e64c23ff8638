"""Free loopback ports, so parallel rigs on one machine do not collide."""

from __future__ import annotations

import socket

_handed_out: set[int] = set()


def free_port() -> int:
    """A port nothing listens on now and that this process has not handed out before."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in _handed_out:
            _handed_out.add(port)
            return port
    raise RuntimeError("could not find a free port on 127.0.0.1")
