"""A pack's HTTP requests and their answers between the host and the pack's worker, on a
stream socket of their own (docs/PACKS.md, "A pack's HTTP routes"), so that a route is
answered while the pack's node runs, as in one process.

A frame is a 4-byte little-endian length, a UTF-8 JSON object (its header), and then as
many bytes of body as the header's "body" says. Both ends read and write with asyncio
streams: the host in ComfyUI's event loop, the worker in its routes thread.

- A request: id, method, target (the path and query as the browser sent them), headers
  (name and value pairs, in order), limit (the most body bytes the host takes back), body.
- An answer: id, status, reason, headers, body; or id and error (one line), when the
  worker could not answer.

Everything read is input: a header over MAX_HEADER_BYTES or of another shape, a body over
the reader's limit, or a stream that ends inside a frame raise ProtocolError with one
line; the connection is then of no more use.
"""

import asyncio
import json
import struct

from .channel import ProtocolError

MAX_HEADER_BYTES = 1 << 20
_LENGTH = struct.Struct("<I")
# What an HTTP header's name may hold (RFC 9110's token) and what no value may.
_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_NOT_IN_VALUES = ("\r", "\n", "\0")


def frame(header, body=b""):
    """`header` (a dict) and `body` as one frame."""
    data = json.dumps(dict(header, body=len(body)), separators=(",", ":")).encode()
    return _LENGTH.pack(len(data)) + data + bytes(body)


async def read_frame(reader, max_body):
    """The next frame's header and body; None when the stream ended between frames."""
    try:
        length = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))[0]
    except asyncio.IncompleteReadError as error:
        if error.partial:
            raise ProtocolError("the stream ended inside a frame's length") from None
        return None
    if length > MAX_HEADER_BYTES:
        raise ProtocolError(f"a frame header of {length} bytes (at most {MAX_HEADER_BYTES})")
    try:
        header = json.loads(await reader.readexactly(length))
        if not isinstance(header, dict):
            raise ProtocolError(f"a frame header that is a {type(header).__name__}, not an object")
        size = header.get("body")
        if type(size) is not int or not 0 <= size <= max_body:
            raise ProtocolError(f"a body of {str(size)[:20]} bytes (at most {max_body})")
        return header, await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        raise ProtocolError("the stream ended inside a frame") from None
    except ValueError as error:  # json's, and UnicodeDecodeError
        raise ProtocolError(f"a frame header that is not JSON ({error})") from None


def checked_headers(value):
    """HTTP header pairs as a peer sent them: a list of [name, value] strings, names
    tokens and values without line breaks, so that neither side writes one header as two."""
    if not isinstance(value, list):
        raise ProtocolError(f"headers that are a {type(value).__name__}, not a list")
    pairs = []
    for pair in value:
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(part, str) for part in pair)):
            raise ProtocolError(f"a header that is not a [name, value] pair of strings: {str(pair)[:80]}")
        name, text = pair
        if not name or not set(name) <= _TOKEN or any(bad in text for bad in _NOT_IN_VALUES):
            raise ProtocolError(f"a malformed header {name[:40]!r}")
        pairs.append((name, text))
    return pairs


def checked_answer(header):
    """An answer's status, reason and headers, or its error, from `header`."""
    error = header.get("error")
    if error is not None:
        return None, None, None, str(error).splitlines()[0][:300] if str(error) else "no reason given"
    status, reason = header.get("status"), header.get("reason", "")
    if type(status) is not int or not 100 <= status <= 599:
        raise ProtocolError(f"an answer's status {str(status)[:20]} (100 to 599)")
    if not isinstance(reason, str) or any(bad in reason for bad in _NOT_IN_VALUES):
        raise ProtocolError("an answer's reason that is not one line")
    return status, reason[:200], checked_headers(header.get("headers")), None


def checked_request(header):
    """A request's method, target, headers and answer limit, from `header`."""
    method, target, limit = header.get("method"), header.get("target"), header.get("limit")
    if not isinstance(method, str) or not method or not set(method) <= _TOKEN:
        raise ProtocolError(f"a request's method {str(method)[:20]!r}")
    if not isinstance(target, str) or not target.startswith("/") or any(c in target for c in " \r\n\0"):
        raise ProtocolError(f"a request's target {str(target)[:80]!r}")
    if type(limit) is not int or limit < 0:
        raise ProtocolError(f"a request's answer limit {str(limit)[:20]}")
    return method, target, checked_headers(header.get("headers")), limit
