"""The wire shapes of SEP-2663: a task as ``tools/call`` creates it, as ``tasks/get``
and ``notifications/tasks`` report it, and the params of the three task methods.

Each class checks its own fields when it is built, so the rules live in one
place: built by our code, a broken value is a ``LocalProtocolError``; read from
a peer (``from_result``, ``from_params``, ...), the same check is a -32602
``RemoteProtocolError``, and so is a key the SEP keeps off that shape.  Keys the
SEP does not name (``_meta``, a later field) are kept in ``extra`` and come back
out on encoding.

Times are ISO 8601 strings on the wire; the core has no clock, so a caller
passes the time it read as a float (seconds since the epoch) and the class
writes it in UTC (``2025-11-25T10:30:00Z``).  Durations are integer
milliseconds (``true`` is not one), positive; ``ttlMs`` may be ``null``
(unlimited).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

import attrs

from .._errors import INVALID_PARAMS, LocalProtocolError, MrtrError, RemoteProtocolError, describe
from ..wire._convert import (
    structure_input_request,
    unstructure_input_request,
    unstructure_input_response,
)
from ..wire._inputs import INPUT_KINDS
from ..wire._model import ErrorObject, InputRequest, InputResponse, JSONObject
from ._status import STATUSES, TaskStatus

T = TypeVar("T")

#: The methods of the extension, each with ``params.taskId``.
TASK_METHODS: Final = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
#: The notification that pushes a task's status (params: a DetailedTask, no resultType).
TASK_NOTIFICATION: Final = "notifications/tasks"
#: The requests a server may answer with a CreateTaskResult.
TASK_AUGMENTABLE_METHODS: Final = frozenset({"tools/call"})

#: Keys of the SEP's Task, by attribute.
_TASK_KEYS: Final = {
    "task_id": "taskId",
    "status": "status",
    "created_at": "createdAt",
    "last_updated_at": "lastUpdatedAt",
    "ttl_ms": "ttlMs",
    "poll_interval_ms": "pollIntervalMs",
    "status_message": "statusMessage",
}
#: Never on any task shape: the 2025-11-25 names, the nested envelope, MRTR's state.
_NEVER_ON_A_TASK: Final = frozenset({"task", "ttl", "pollInterval", "requestState"})
#: The status-specific payload of a DetailedTask, by the status that carries it.
_PAYLOAD_KEYS: Final = {"inputRequests": "input_required", "result": "completed", "error": "failed"}


# --- field checks (one each; both directions use them) ---------------------------------


def _timestamp(value: Any) -> str:
    """A float (seconds since the epoch) written in UTC, or an ISO 8601 string kept as it is."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            moment = datetime.datetime.fromtimestamp(value, tz=datetime.UTC)
        except (OverflowError, OSError, ValueError) as exc:
            raise LocalProtocolError(f"no timestamp for {describe(value)} seconds") from exc
        text = moment.isoformat(timespec="milliseconds")
        return text.replace("+00:00", "Z")
    return value  # type: ignore[no-any-return] # (checked by the validator, whatever it is)


#: A date and a time (what a peer's reader, the conformance suite's included, expects).
_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}")


def _check_timestamp(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, str):
        raise LocalProtocolError(f"{_TASK_KEYS[attribute.name]} must be an ISO 8601 string")
    try:
        if not _DATE_TIME.match(value):
            raise ValueError(value)
        datetime.datetime.fromisoformat(value)
    except ValueError:
        raise LocalProtocolError(
            f"{_TASK_KEYS[attribute.name]} {describe(value)} is not an ISO 8601 timestamp"
        ) from None


def _check_ms(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise LocalProtocolError(
            f"{_TASK_KEYS[attribute.name]} must be a positive integer of milliseconds, "
            f"not {describe(value)}"
        )


def _check_task_id(_: Any, __: Any, value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise LocalProtocolError(f"taskId must be a non-empty string, not {describe(value)}")


def _check_status(_: Any, __: Any, value: Any) -> None:
    if not isinstance(value, str) or value not in STATUSES:
        raise LocalProtocolError(
            f"status must be one of {', '.join(STATUSES)}, not {describe(value)}"
        )


def _check_message(_: Any, __: Any, value: Any) -> None:
    if value is not None and not isinstance(value, str):
        raise LocalProtocolError(f"statusMessage must be a string, not {describe(value)}")


def _check_extra(_: Any, __: Any, value: Any) -> None:
    if not isinstance(value, Mapping):
        raise LocalProtocolError("extra must be a mapping")


def _as_peer_error(build: Callable[[], T]) -> T:
    """``build()``, its LocalProtocolError (a field check failed on a peer's value) as
    the -32602 it is when the value came from a peer."""
    try:
        return build()
    except MrtrError as exc:
        raise RemoteProtocolError(exc.message, code=INVALID_PARAMS) from exc


def _mapping(raw: Any, what: str) -> Mapping[str, Any]:
    if type(raw) is not dict and not isinstance(raw, Mapping):
        raise RemoteProtocolError(f"{what} must be an object", code=INVALID_PARAMS)
    return raw


# --- the task shapes -------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class _Task:
    """The fields of the SEP's ``Task``, common to every task shape."""

    task_id: str = attrs.field(validator=_check_task_id)
    status: TaskStatus = attrs.field(validator=_check_status)
    created_at: str = attrs.field(converter=_timestamp, validator=_check_timestamp)
    last_updated_at: str = attrs.field(converter=_timestamp, validator=_check_timestamp)
    ttl_ms: int | None = attrs.field(validator=_check_ms)
    poll_interval_ms: int | None = attrs.field(default=None, validator=_check_ms)
    status_message: str | None = attrs.field(default=None, validator=_check_message)
    extra: JSONObject = attrs.field(factory=dict, repr=False, validator=_check_extra)

    def _task_fields(self) -> dict[str, Any]:
        # unknown keys first (a known field wins); the shape's resultType is its own
        out: dict[str, Any] = {k: v for k, v in self.extra.items() if k != "resultType"}
        out["taskId"] = self.task_id
        out["status"] = self.status
        out["createdAt"] = self.created_at
        out["lastUpdatedAt"] = self.last_updated_at
        out["ttlMs"] = self.ttl_ms
        if self.poll_interval_ms is not None:
            out["pollIntervalMs"] = self.poll_interval_ms
        if self.status_message is not None:
            out["statusMessage"] = self.status_message
        return out

    @staticmethod
    def _read_task_fields(raw: Mapping[str, Any], what: str) -> dict[str, Any]:
        """The attribute values of the Task keys of ``raw`` (values unchecked) and its
        other keys in ``extra``; a missing required key is -32602."""
        for key in ("taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs"):
            if key not in raw:
                raise RemoteProtocolError(f"{what} has no {key}", code=INVALID_PARAMS)
        for key in _NEVER_ON_A_TASK:
            if key in raw:
                raise RemoteProtocolError(f"{what} must not carry {key}", code=INVALID_PARAMS)
        fields: dict[str, Any] = {}
        for name, key in _TASK_KEYS.items():
            if key in raw:
                value = raw[key]
                if value is None and name in ("poll_interval_ms", "status_message"):
                    # (an optional key is absent or of its type: ``null`` is neither)
                    raise RemoteProtocolError(f"{key} must not be null", code=INVALID_PARAMS)
                if name in ("created_at", "last_updated_at") and not isinstance(value, str):
                    # (a float is our caller's convenience, never a peer's wire value)
                    raise RemoteProtocolError(
                        f"{key} must be an ISO 8601 string", code=INVALID_PARAMS
                    )
                fields[name] = value
        return fields


def _read_result_type(raw: Mapping[str, Any], allowed: tuple[str | None, ...], what: str) -> None:
    found = raw.get("resultType")
    if found not in allowed:
        raise RemoteProtocolError(
            f"{what} has resultType {describe(found)}, not {describe(allowed[0])}",
            code=INVALID_PARAMS,
        )


@attrs.frozen(kw_only=True)
class CreateTaskResult(_Task):
    """The answer to a ``tools/call`` that became a task: ``resultType: "task"`` and the
    task's fields, flat (``taskId``, ``status``, ``createdAt``, ``lastUpdatedAt``,
    ``ttlMs``, ``pollIntervalMs?``, ``statusMessage?``).

    Never a nested ``task``, nor a ``result``, ``error``, ``inputRequests`` or
    ``requestState``: those are what ``tasks/get`` reports (:class:`DetailedTask`),
    and MRTR's state stays with the MRTR phase that may precede the task.
    """

    def to_result(self) -> dict[str, Any]:
        """The result mapping to send, ``resultType: "task"`` included."""
        out = self._task_fields()
        out["resultType"] = "task"
        return out

    @classmethod
    def from_result(cls, raw: Any) -> CreateTaskResult:
        """Read a peer's ``resultType: "task"`` result (-32602 when it breaks the shape)."""
        what = "a CreateTaskResult"
        mapping = _mapping(raw, what)
        _read_result_type(mapping, ("task",), what)
        for key in _PAYLOAD_KEYS:
            if key in mapping:
                raise RemoteProtocolError(
                    f"{what} must not carry {key} (tasks/get reports it)", code=INVALID_PARAMS
                )
        fields = cls._read_task_fields(mapping, what)
        extra = {k: v for k, v in mapping.items() if k not in _KNOWN_CREATE}
        return _as_peer_error(lambda: cls(**fields, extra=extra))


_KNOWN_CREATE: Final = frozenset({*_TASK_KEYS.values(), "resultType"})
_KNOWN_DETAILED: Final = frozenset({*_KNOWN_CREATE, *_PAYLOAD_KEYS})


def _check_error(_: Any, __: Any, value: Any) -> None:
    if value is not None and not isinstance(value, ErrorObject):
        raise LocalProtocolError(f"error must be an ErrorObject, not {describe(value)}")


def _check_result(_: Any, __: Any, value: Any) -> None:
    if value is not None and not isinstance(value, Mapping):
        raise LocalProtocolError(f"result must be an object, not {describe(value)}")


def _check_input_requests(_: Any, __: Any, value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, Mapping) or not value:
        raise LocalProtocolError("inputRequests must be a non-empty mapping of key to request")
    for key, request in value.items():
        if not isinstance(key, str) or INPUT_KINDS.kind_of(request) is None:
            raise LocalProtocolError(
                f"inputRequests: {describe(key)} must name a typed input request"
            )


@attrs.frozen(kw_only=True)
class DetailedTask(_Task):
    """A task as ``tasks/get`` answers it and ``notifications/tasks`` pushes it: the task's
    fields, and what its status carries, only there: ``input_requests`` (the outstanding
    asks, by key) while ``input_required``, ``result`` (what the request would have
    returned, a tool's ``isError`` result included) when ``completed``, ``error`` (the
    JSON-RPC error) when ``failed``.
    """

    input_requests: Mapping[str, InputRequest] | None = attrs.field(
        default=None, validator=_check_input_requests
    )
    result: JSONObject | None = attrs.field(default=None, validator=_check_result)
    error: ErrorObject | None = attrs.field(default=None, validator=_check_error)

    def __attrs_post_init__(self) -> None:
        # What each status carries, and only it.
        carried = {
            "inputRequests": self.input_requests is not None,
            "result": self.result is not None,
            "error": self.error is not None,
        }
        for key, status in _PAYLOAD_KEYS.items():
            if carried[key] and self.status != status:
                raise LocalProtocolError(f"a {self.status} task does not carry {key}")
            if not carried[key] and self.status == status:
                raise LocalProtocolError(f"a {status} task carries {key}")

    def _detailed_fields(self) -> dict[str, Any]:
        out = self._task_fields()
        if self.input_requests is not None:
            out["inputRequests"] = {
                key: unstructure_input_request(request)
                for key, request in self.input_requests.items()
            }
        if self.result is not None:
            out["result"] = self.result
        if self.error is not None:
            error: dict[str, Any] = {"code": self.error.code, "message": self.error.message}
            if self.error.data is not None:
                error["data"] = self.error.data
            out["error"] = error
        return out

    def to_result(self) -> dict[str, Any]:
        """The ``tasks/get`` result mapping, ``resultType: "complete"`` included."""
        out = self._detailed_fields()
        out["resultType"] = "complete"
        return out

    def to_notification_params(self) -> dict[str, Any]:
        """The params of the ``notifications/tasks`` that pushes this task."""
        return self._detailed_fields()

    @classmethod
    def from_result(cls, raw: Any) -> DetailedTask:
        """Read a peer's ``tasks/get`` result (-32602 when it breaks the shape)."""
        return cls._read(raw, "a tasks/get result")

    @classmethod
    def from_notification_params(cls, raw: Any) -> DetailedTask:
        """Read the params of a peer's ``notifications/tasks`` (-32602 when they break
        the shape)."""
        return cls._read(raw, "a notifications/tasks")

    @classmethod
    def _read(cls, raw: Any, what: str) -> DetailedTask:
        mapping = _mapping(raw, what)
        # (a result's resultType is "complete"; a missing one reads as "complete")
        _read_result_type(mapping, ("complete", None), what)
        fields = cls._read_task_fields(mapping, what)
        if "inputRequests" in mapping:
            asks = _mapping(mapping["inputRequests"], "inputRequests")
            fields["input_requests"] = {
                str(key): structure_input_request(request) for key, request in asks.items()
            }
        if "result" in mapping:
            fields["result"] = _mapping(mapping["result"], "result")
        if "error" in mapping:
            fields["error"] = _read_error(mapping["error"])
        extra = {k: v for k, v in mapping.items() if k not in _KNOWN_DETAILED}
        return _as_peer_error(lambda: cls(**fields, extra=extra))


def _read_error(raw: Any) -> ErrorObject:
    error = _mapping(raw, "error")
    code = error.get("code")
    message = error.get("message")
    if not isinstance(code, int) or isinstance(code, bool) or not isinstance(message, str):
        raise RemoteProtocolError(
            "a failed task's error needs an integer code and a string message",
            code=INVALID_PARAMS,
        )
    return ErrorObject(code=code, message=message, data=error.get("data"))


# --- the task methods' params ------------------------------------------------------------


def _check_method(_: Any, __: Any, value: Any) -> None:
    if value not in TASK_METHODS:
        raise LocalProtocolError(
            f"{describe(value)} is not a task method ({', '.join(sorted(TASK_METHODS))})"
        )


@attrs.frozen(kw_only=True)
class TaskRequest:
    """The params of ``tasks/get``, ``tasks/update`` or ``tasks/cancel`` (``method``).

    ``input_responses`` are the answers a ``tasks/update`` carries, by the key of the
    ask (a typed :data:`~mrtr_core.wire.InputResponse` or a plain mapping): required
    there, absent from the other two.  Read from a peer they stay plain mappings, to
    be read against what was asked (``mrtr_core.server.Answers``).  A task method
    never carries ``requestState``: that is MRTR's, on the original request.
    """

    method: str = attrs.field(validator=_check_method)
    task_id: str = attrs.field(validator=_check_task_id)
    input_responses: Mapping[str, InputResponse | JSONObject] | None = None
    extra: JSONObject = attrs.field(factory=dict, repr=False, validator=_check_extra)

    def __attrs_post_init__(self) -> None:
        answers = self.input_responses
        if self.method != "tasks/update":
            if answers is not None:
                raise LocalProtocolError(f"{self.method} carries no inputResponses")
            return
        if not isinstance(answers, Mapping):
            raise LocalProtocolError(
                "tasks/update needs inputResponses, a mapping of key to answer"
            )
        for key, answer in answers.items():
            if not isinstance(key, str) or not isinstance(
                answer, (Mapping, *INPUT_KINDS.response_for_request.values())
            ):
                raise LocalProtocolError(
                    f"inputResponses: {describe(key)} must map to an answer object"
                )

    def to_params(self, meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The request's params: ``taskId``, the answers of an update, ``_meta`` when given
        (every 2026-07-28 request carries it), the extra keys; never ``requestState``."""
        out: dict[str, Any] = {k: v for k, v in self.extra.items() if k != "requestState"}
        out["taskId"] = self.task_id
        if self.input_responses is not None:
            out["inputResponses"] = {
                key: unstructure_input_response(answer)
                for key, answer in self.input_responses.items()
            }
        if meta is not None:
            out["_meta"] = dict(meta)
        return out

    @classmethod
    def from_params(cls, method: str, params: Any) -> TaskRequest:
        """Read the params of a peer's task request (-32602 when they break the shape).

        A ``requestState`` is dropped: it has no meaning here, and a server must
        not act on one; so are the ``inputResponses`` of a ``tasks/get`` or
        ``tasks/cancel`` (a read stays a read: only ``tasks/update`` writes).
        Gate the request (``require_tasks``) before reading it or looking its task
        up: a client that did not declare the extension is owed -32021, whatever
        its params.
        """
        if method not in TASK_METHODS:
            raise LocalProtocolError(f"{describe(method)} is not a task method")
        mapping = _mapping(params, f"{method} params")
        if "taskId" not in mapping:
            raise RemoteProtocolError(f"{method} needs a taskId", code=INVALID_PARAMS)
        answers: Any = None
        if method == "tasks/update":
            if mapping.get("inputResponses") is None:
                raise RemoteProtocolError("tasks/update needs inputResponses", code=INVALID_PARAMS)
            answers = dict(_mapping(mapping["inputResponses"], "inputResponses"))
        extra = {
            k: v
            for k, v in mapping.items()
            if k not in ("taskId", "inputResponses", "requestState")
        }
        task_id = mapping["taskId"]
        return _as_peer_error(
            lambda: cls(method=method, task_id=task_id, input_responses=answers, extra=extra)
        )
