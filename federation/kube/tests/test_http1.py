"""The HTTP/1.1 response reader, fed bytes the way a socket hands them over: whole, split anywhere, one at a time."""

from __future__ import annotations

import pytest

from federation.kube.http1 import ProtocolError, ResponseReader


def _fed(data: bytes, *, method: str = "GET", step: int | None = None) -> tuple[ResponseReader, bytes]:
    reader = ResponseReader(method=method)
    body = b""
    pieces = [data] if step is None else [data[i : i + step] for i in range(0, len(data), step)]
    for piece in pieces:
        reader.feed(piece)
        body += reader.take_body()
    return reader, body


LENGTH = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"kind":1}\n'
CHUNKED = (
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n"
    b'6\r\n{"a":1\r\n'
    b"2;ext=1\r\n}\n\r\n"
    b'A\r\n{"b":[2,3]\r\n'
    b"2\r\n}\n\r\n"
    b"0\r\nX-Trailer: t\r\n\r\n"
)


@pytest.mark.parametrize("step", [None, 1, 3, 7])
def test_a_content_length_body_in_any_split(step: int | None) -> None:
    reader, body = _fed(LENGTH, step=step)
    assert reader.done
    assert reader.keep_alive
    assert reader.head is not None
    assert reader.head.status == 200
    assert body == b'{"kind":1}\n'


@pytest.mark.parametrize("step", [None, 1, 2, 5])
def test_a_chunked_body_in_any_split_with_extensions_and_trailers(step: int | None) -> None:
    reader, body = _fed(CHUNKED, step=step)
    assert reader.done
    assert reader.keep_alive
    assert body == b'{"a":1}\n{"b":[2,3]}\n'


def test_a_watch_is_readable_chunk_by_chunk_before_it_ends() -> None:
    reader, body = _fed(CHUNKED[: CHUNKED.index(b"A\r\n")])
    assert not reader.done
    assert body == b'{"a":1}\n'


def test_the_head_says_retry_after_and_connection_close() -> None:
    reader, body = _fed(
        b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}"
    )
    assert reader.head is not None
    assert reader.head.status == 429
    assert reader.head.retry_after == "3"
    assert reader.done
    assert not reader.keep_alive
    assert body == b"{}"


def test_header_names_are_matched_whatever_their_case() -> None:
    reader, body = _fed(b"HTTP/1.1 200 OK\r\ncontent-LENGTH: 2\r\nRETRY-after: 1\r\n\r\nok")
    assert reader.done
    assert body == b"ok"
    assert reader.head is not None
    assert reader.head.retry_after == "1"


def test_a_body_without_length_ends_when_the_server_closes_and_the_connection_is_not_reused() -> None:
    reader, body = _fed(b"HTTP/1.1 200 OK\r\n\r\npart one, ")
    assert not reader.done
    reader.feed(b"part two")
    reader.feed_eof()
    assert reader.done
    assert not reader.keep_alive
    assert body + reader.take_body() == b"part one, part two"


@pytest.mark.parametrize("head", [b"HTTP/1.1 204 No Content\r\n\r\n", b"HTTP/1.1 304 Not Modified\r\n\r\n"])
def test_no_body_statuses_end_at_the_head(head: bytes) -> None:
    reader, body = _fed(head)
    assert reader.done
    assert reader.keep_alive
    assert body == b""


def test_an_interim_answer_is_skipped() -> None:
    reader, _ = _fed(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")
    assert reader.head is not None
    assert reader.head.status == 201
    assert reader.done


def test_http_1_0_is_not_kept_alive() -> None:
    reader, _ = _fed(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")
    assert reader.done
    assert not reader.keep_alive


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"SSH-2.0-OpenSSH\r\n\r\n", "bad status line"),
        (b"HTTP/1.1 abc\r\n\r\n", "bad status line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "bad Content-Length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY", "chunk not followed by CRLF"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nab", "bytes after the end"),
    ],
)
def test_malformed_answers_are_refused(data: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        _fed(data)


def test_a_head_that_never_ends_is_refused() -> None:
    reader = ResponseReader(method="GET")
    with pytest.raises(ProtocolError, match="head too long"):
        reader.feed(b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 20000)


def test_a_close_before_the_end_is_an_error() -> None:
    reader, _ = _fed(LENGTH[:-3])
    with pytest.raises(ProtocolError, match="closed before the response was complete"):
        reader.feed_eof()


def test_take_body_hands_each_byte_over_once_and_tracks_what_waits() -> None:
    reader = ResponseReader(method="GET")
    reader.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nabc")
    assert reader.buffered == 3
    reader.feed(b"def")
    assert reader.buffered == 6
    assert reader.take_body() == b"abcdef"
    assert reader.buffered == 0
    assert reader.take_body() == b""
