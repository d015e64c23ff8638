"""Reading one HTTP/1.1 response from bytes, with no I/O: the pure half of :mod:`federation.kube.connections`.

An apiserver answers kfed in three shapes: a body with ``Content-Length`` (most calls), a chunked body (long lists,
and every watch, whose events arrive one chunk after another for minutes), and rarely a body that ends when the
server closes the connection. :class:`ResponseReader` takes the bytes as they arrive and hands back the head once it
is complete, then the body's bytes as they are decoded, and says when the response is over and whether the connection
may carry another request. Of the head it reads the status line, the headers that frame the body (``Content-Length``,
``Transfer-Encoding``, ``Connection``) and ``Retry-After``, and nothing else. A bad status line, bad framing, or bytes
after the end raise :class:`ProtocolError`; nothing is guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_HEAD_BYTES = 64 * 1024
"""A head longer than this is refused (the apiserver's are a few hundred bytes)."""


class ProtocolError(ValueError):
    """The bytes are not an HTTP/1.1 response this reader understands."""


@dataclass(frozen=True, slots=True)
class Head:
    status: int
    retry_after: str | None = None
    """The ``Retry-After`` header (the one header kfed's callers read; the framing headers are the reader's)."""


# Body framing states.
_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILERS, _UNTIL_CLOSE, _DONE = range(8)


class ResponseReader:
    """One response on one connection: :meth:`feed` bytes in, read :attr:`head`, :meth:`take_body` and
    :attr:`done` out. Bytes after the response's end are an error (kfed never pipelines requests)."""

    def __init__(self, *, method: str) -> None:
        self._method = method
        self._buffer = bytearray()
        self._state = _HEAD
        self._remaining = 0
        self._body: list[bytes] = []
        self._body_size = 0
        self.head: Head | None = None
        self.keep_alive = False
        """True once the response is done if the connection may carry another request."""

    @property
    def done(self) -> bool:
        return self._state == _DONE

    @property
    def buffered(self) -> int:
        """Decoded body bytes not taken yet (the caller pauses reading when this grows)."""
        return self._body_size

    def take_body(self) -> bytes:
        """The body bytes decoded since the last call."""
        if not self._body:
            return b""
        data = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        self._body.clear()
        self._body_size = 0
        return data

    def feed(self, data: bytes) -> None:
        if self._state == _DONE:
            if data:
                raise ProtocolError("bytes after the end of the response")
            return
        self._buffer += data
        self._advance()

    def feed_eof(self) -> None:
        """The peer closed the connection: the end of a body read until close; an error anywhere else."""
        if self._state == _UNTIL_CLOSE:
            self._take(len(self._buffer))
            self._state = _DONE
            self.keep_alive = False
            return
        if self._state != _DONE:
            raise ProtocolError("connection closed before the response was complete")

    def _take(self, size: int) -> None:
        if size:
            piece = bytes(self._buffer[:size])
            del self._buffer[:size]
            self._body.append(piece)
            self._body_size += size

    def _take_remaining(self) -> bool:
        """Take what has come of the ``_remaining`` bytes of a body or chunk; True once all of them have."""
        size = min(self._remaining, len(self._buffer))
        self._take(size)
        self._remaining -= size
        return not self._remaining

    def _advance(self) -> None:
        while True:
            state = self._state
            if state == _HEAD:
                if not self._read_head():
                    return
            elif state == _LENGTH:
                if not self._take_remaining():
                    return
                self._state = _DONE
            elif state == _CHUNK_SIZE:
                end = self._buffer.find(b"\r\n")
                if end < 0:
                    if len(self._buffer) > 1024:
                        raise ProtocolError("chunk size line too long")
                    return
                text = bytes(self._buffer[:end]).split(b";", 1)[0].strip()
                del self._buffer[: end + 2]
                try:
                    size = int(text, 16)
                except ValueError:
                    raise ProtocolError(f"bad chunk size {text[:20]!r}") from None
                if size < 0:
                    raise ProtocolError(f"bad chunk size {text[:20]!r}")
                self._remaining = size
                self._state = _CHUNK_DATA if size else _TRAILERS
            elif state == _CHUNK_DATA:
                if not self._take_remaining():
                    return
                self._state = _CHUNK_END
            elif state == _CHUNK_END:
                if len(self._buffer) < 2:
                    return
                if self._buffer[:2] != b"\r\n":
                    raise ProtocolError("chunk not followed by CRLF")
                del self._buffer[:2]
                self._state = _CHUNK_SIZE
            elif state == _TRAILERS:
                end = self._buffer.find(b"\r\n")
                if end < 0:
                    return
                del self._buffer[: end + 2]
                if end == 0:  # the empty line after the (usually absent) trailers
                    self._state = _DONE
            elif state == _UNTIL_CLOSE:
                self._take(len(self._buffer))
                return
            else:  # _DONE
                if self._buffer:
                    raise ProtocolError("bytes after the end of the response")
                return

    def _read_head(self) -> bool:
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buffer) > MAX_HEAD_BYTES:
                raise ProtocolError("response head too long")
            return False
        raw = bytes(self._buffer[: end + 2])  # each line, the last one too, ends in CRLF
        del self._buffer[: end + 4]
        line_end = raw.find(b"\r\n")
        version, _, rest = raw[:line_end].partition(b" ")
        code = rest[:3]
        if not version.startswith(b"HTTP/1.") or not code.isdigit():
            raise ProtocolError(f"bad status line {raw[:line_end][:80]!r}")
        status = int(code)
        if 100 <= status < 200:  # an interim answer (kfed sends no Expect): the real head follows
            return True
        # Only the headers that frame the body or that a caller reads, found in one lower-cased copy (parsing every
        # header line was most of this reader's CPU).
        lower = raw.lower()

        def header(name: bytes) -> str | None:
            at = lower.find(b"\r\n" + name + b":")
            if at < 0:
                return None
            start = at + len(name) + 3
            return raw[start : lower.find(b"\r\n", start)].strip().decode("latin-1")

        length, encoding, connection = header(b"content-length"), header(b"transfer-encoding"), header(b"connection")
        self.head = Head(status, header(b"retry-after"))
        self.keep_alive = version == b"HTTP/1.1" and "close" not in (connection or "").lower()
        if self._method == "HEAD" or status in (204, 304):
            self._state = _DONE
        elif encoding is not None and "chunked" in encoding.lower():
            self._state = _CHUNK_SIZE
        elif length is not None:
            if not length.isdigit():
                raise ProtocolError(f"bad Content-Length {length[:20]!r}")
            self._remaining = int(length)
            self._state = _LENGTH if self._remaining else _DONE
        else:
            self._state = _UNTIL_CLOSE
            self.keep_alive = False
        return True
