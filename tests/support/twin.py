"""A stand-in for ``Connection`` that runs two connections in lockstep and checks they agree.

``TwinConnection(role, **options)`` builds the same connection twice.  The
*wire* one is driven exactly as the test drives it, through bytes
(``receive_data`` / ``send``).  The *mirror* one is driven through the message
variants: every complete message the test feeds is decoded here (with the
connection's own codec) and handed over with ``receive_message``, and every
``send`` is ``send_message`` on the mirror, whose message must encode to the
very bytes the wire one wrote.  Input that cannot be decoded (or is blank, or
over ``max_message_size``) reaches the mirror as the same bytes, so refusals
are compared too, and mixing both inputs is exercised on the way.

Every call returns the wire connection's result after checking that the
mirror gave the same one (events and results compared field by field, errors
by class, code, message, data and request id), or raised the same error.
Tests written against ``Connection`` run unchanged against it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import attrs

from mrtr_core import CallEvent, Connection, MrtrError, RemoteProtocolError
from mrtr_core.wire import Codec

_BLANK = b" \t\r"


#: An oversize report says how much of the message had arrived when the bound was passed
#: ("at least N bytes"): that depends on how the bytes were cut, which the twins differ in.
_AT_LEAST = re.compile(r"message of at least \d+ bytes")


def _text(message: str) -> str:
    return _AT_LEAST.sub("message of at least N bytes", message)


def normal(value: Any) -> Any:
    """A form of ``value`` that compares equal across the two connections."""
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, BaseException):
        fields = (
            (
                value.code,
                _text(value.message),
                normal(value.data),
                getattr(value, "request_id", None),
            )
            if isinstance(value, MrtrError)
            else (str(value),)
        )
        return (type(value), fields)
    if attrs.has(type(value)):
        return (
            type(value),
            tuple((f.name, normal(getattr(value, f.name))) for f in attrs.fields(type(value))),
        )
    if isinstance(value, dict):
        return {k: normal(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(normal(v) for v in value)
    return value


def _outcome(action: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    try:
        return action(), None
    except Exception as exc:  # compared, then re-raised
        return None, exc


def _agree(wire: tuple[Any, BaseException | None], mirror: tuple[Any, BaseException | None]) -> Any:
    result, error = wire
    assert normal(error) == normal(mirror[1]), (error, mirror[1])
    if error is not None:
        raise error
    assert normal(result) == normal(mirror[0]), (result, mirror[0])
    return result


class TwinConnection:
    def __init__(self, role: Any, **options: Any) -> None:
        self._wire = Connection(role, **options)
        self._mirror = Connection(role, **options)
        given = options.get("json", "auto")
        self._codec = given if isinstance(given, Codec) else Codec(given)
        self._lines = self._wire.framing == "lines"
        self._max = options.get("max_message_size", 16 * 1024 * 1024)
        self._pending = b""  # (lines) bytes of a line the mirror has not been given yet
        self._raw_line = False  # (lines) the line being received reaches the mirror as bytes
        # The mirror's counterpart of each object the wire connection handed out.
        self._counterparts: dict[int, tuple[Any, Any]] = {}

    # --- Feeding ---------------------------------------------------------------------

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        self._wire.receive_data(data)  # (when it refuses, it buffered nothing)
        data = bytes(data)
        if not data:
            if self._lines and self._pending:
                self._one_message(self._pending, final=True)
                self._pending = b""
            self._mirror.receive_data(b"")
        elif not self._lines:
            self._one_message(data)
        else:
            self._feed_lines(data)

    def _feed_lines(self, data: bytes) -> None:
        while data:
            newline = data.find(b"\n")
            if self._raw_line:  # an oversize line, passed on as it comes up to its newline
                chunk = data if newline < 0 else data[: newline + 1]
                self._mirror.receive_data(chunk)
                self._raw_line = newline < 0
                data = data[len(chunk) :]
                continue
            if newline < 0:
                self._pending += data
                if len(self._pending) > self._max + self._pending.endswith(b"\r"):
                    # The wire connection reports this line before its end: so must the mirror.
                    self._mirror.receive_data(self._pending)
                    self._pending = b""
                    self._raw_line = True
                return
            line = self._pending + data[:newline]
            self._pending = b""
            data = data[newline + 1 :]
            self._one_message(line, ending=b"\n")

    def _one_message(self, frame: bytes, *, ending: bytes = b"", final: bool = False) -> None:
        text = frame[:-1] if (ending or final) and frame.endswith(b"\r") else frame
        if len(text) > self._max or not text.strip(_BLANK + b"\n"):
            self._mirror.receive_data(frame + ending)
            return
        try:
            value = self._codec.loads(text)
        except RemoteProtocolError:
            self._mirror.receive_data(frame + ending)
            return
        self._mirror.receive_message(value)

    # --- Events and sends -------------------------------------------------------------

    def next_event(self, now: float | None = None) -> Any:
        wire = _outcome(lambda: self._wire.next_event(now))
        mirror = _outcome(lambda: self._mirror.next_event(now))
        event = _agree(wire, mirror)
        self._remember(event, mirror[0])
        return event

    def _remember(self, wire: Any, mirror: Any) -> None:
        self._counterparts[id(wire)] = (wire, mirror)  # (kept alive: ids stay unique)
        if isinstance(wire, CallEvent):
            self._counterparts[id(wire.event)] = (wire.event, mirror.event)

    def _counterpart(self, event: Any) -> Any:
        found = self._counterparts.get(id(event))
        if found is not None and found[0] is event:
            return found[1]
        if isinstance(event, CallEvent):
            inner = self._counterparts.get(id(event.event))
            if inner is not None and inner[0] is event.event:
                return CallEvent(call=event.call, event=inner[1])
        return event

    def send(self, event: Any) -> bytes:
        wire = _outcome(lambda: self._wire.send(event))
        mirror = _outcome(lambda: self._mirror.send_message(self._counterpart(event)))
        assert normal(wire[1]) == normal(mirror[1]), (wire[1], mirror[1])
        if wire[1] is not None:
            raise wire[1]
        message = mirror[0]
        expected = b"" if message is None else self._codec.encode(message)
        if message is not None and self._lines:
            expected += b"\n"
        assert wire[0] == expected, (wire[0], expected)
        return wire[0]  # type: ignore[no-any-return]

    def send_message(self, event: Any) -> Any:
        wire = _outcome(lambda: self._wire.send_message(event))
        mirror = _outcome(lambda: self._mirror.send_message(self._counterpart(event)))
        return _agree(wire, mirror)

    def receive_message(self, value: Any) -> None:
        wire = _outcome(lambda: self._wire.receive_message(value))
        mirror = _outcome(lambda: self._mirror.receive_message(value))
        _agree(wire, mirror)

    # --- Everything else: both, compared ------------------------------------------------

    def __getattr__(self, name: str) -> Any:
        wire = getattr(self._wire, name)
        if name.startswith("_"):
            return wire  # internals: the wire connection's, as a test that peeks expects
        mirror = getattr(self._mirror, name)
        if not callable(wire):
            assert normal(wire) == normal(mirror), (name, wire, mirror)
            return wire

        def both(*args: Any, **kwargs: Any) -> Any:
            return _agree(
                _outcome(lambda: wire(*args, **kwargs)), _outcome(lambda: mirror(*args, **kwargs))
            )

        return both
