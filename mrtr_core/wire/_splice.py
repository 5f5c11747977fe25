"""Writing a request from parts already encoded: the retry legs of a call.

Every leg of a call carries the same params (the original ones, round fields
stripped, ``_meta`` stamped) plus, on a retry, this round's ``inputResponses``
and ``requestState``.  Encoding those same params again on every leg is most of
what writing a retry costs with the standard library's encoder; instead, the
params written for the first leg are kept as bytes and each retry appends its
round fields to them.

Only compact JSON objects are joined (what both backends write: ``{`` first,
``}`` last, members separated by ``,``); anything else makes
:func:`join_objects` return ``None`` and the caller encodes the whole message.
The two parts never share a key (the first leg's params have no round fields,
the appended part has nothing else), so the result is an object without
duplicate keys, equal in value to the merged params encoded at once.
"""

from __future__ import annotations

_REQUEST_HEAD = b'{"jsonrpc":"2.0","id":'


def join_objects(head: bytes, tail: bytes) -> bytes | None:
    """One encoded object with the members of ``head`` and then those of ``tail``
    (both encoded objects, without a common key); ``None`` when either is not a
    compact JSON object."""
    if head[:1] != b"{" or head[-1:] != b"}" or tail[:1] != b"{" or tail[-1:] != b"}":
        return None
    if tail == b"{}":  # nothing to add (b"{" alone was refused above: it ends in "{")
        return head
    if head == b"{}":
        return tail
    return b"".join((head[:-1], b",", tail[1:]))


def request_bytes(
    request_id: int, method_json: bytes, params_json: bytes, end: bytes = b""
) -> bytes:
    """A JSON-RPC request from its integer id, encoded method and encoded params,
    followed by ``end`` (the framing's newline, if any)."""
    return b"".join(
        (
            _REQUEST_HEAD,
            b"%d" % request_id,
            b',"method":',
            method_json,
            b',"params":',
            params_json,
            b"}",
            end,
        )
    )
