"""The ``--trace FILE`` of ``mrtr call``: every JSON-RPC message, one JSON line each.

The model: the client calls its ``tracer`` for each message it sends and
receives (a :class:`~mrtr_transports.client.tracing.TraceRecord`: ``dir``,
``t``, ``flow``, ``round``, ``msg``; a message counts as sent once the link
has really transmitted it);
:class:`NdjsonTracer` writes each as one line of NDJSON::

    {"dir": "send", "t": 0.0123, "flow": 1, "round": 0, "msg": {"jsonrpc": "2.0", ...}}

``t`` is seconds since the tracer's ``start`` (the start of the command),
``flow`` the client's handle of the multi round-trip call the message belongs
to (``null`` for plain requests and the handshake), ``round`` the round the
leg carries answers for (``null`` when not known).  Lines are flushed as they
are written, so a trace of a call that crashed or hung is still complete.

**requestState echo check.**  For each flow the tracer remembers the
``requestState`` of the last ``input_required`` result it received, and checks
the next leg it sends: a leg that carries another value (changed, truncated,
re-encoded), that drops a state it should echo, or that invents one when the
result had none gets a ``"warning"`` field on its line, e.g.
``"warning": "requestState echo differs from the one received"``.  A request
outside any flow that carries ``requestState`` or ``inputResponses`` (a state
leaking into another request) is flagged as well.  The comparison is made on
the messages as they were, before redaction.

**Redaction** (the trace is for sharing; credentials are not):

* the value of every object member whose name, lower-cased without ``-``/``_``,
  is a credential name (``authorization``, ``proxy-authorization``, ``cookie``,
  ``set-cookie``, ``x-api-key``, ``api_key``, ``token``, ``access_token``,
  ``refresh_token``, ``id_token``, ``client_secret``, ``secret``, ``password``,
  ``passwd``, ``passphrase``, ``private_key``, ``credentials``, ...) or ends in
  one (``db_password``, ``clientSecret``, ``githubApiKey``, ...), anywhere in a
  message, including the answers the user typed into a form;
* ``Bearer``/``Basic`` credentials inside any string;
* the password of ``scheme://user:password@host`` URLs, and the values of
  ``access_token``, ``refresh_token``, ``id_token``, ``token``, ``api_key``,
  ``apikey``, ``key``, ``password``, ``secret``, ``client_secret``,
  ``client_assertion``, ``assertion``, ``code`` and ``code_verifier`` parameters
  in any string (a URL's query or fragment, a form body): an OAuth authorization
  response, token request or token response pasted into a message shows none of
  its secrets (``code_verifier`` and ``client_assertion`` are credential names too).

The trace holds MCP messages only: the HTTP requests of the OAuth flow (where the
``Authorization`` header, the code and the tokens travel) are never traced.

Each is replaced by ``"[REDACTED]"``.  Names such as ``progressToken`` and
``maxTokens`` are not credentials and are kept; ``requestState`` is kept
byte for byte (it is integrity-protected server state, readable by design,
and what the echo check is about).

Bounds: the per-flow memory holds at most ``max_flows`` entries (the oldest is
forgotten first), and so does the map from leg ids to flows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import IO, Any

from ..client.tracing import TraceRecord
from . import json_text

REDACTED = "[REDACTED]"
WARN_ECHO_DIFFERS = "requestState echo differs from the one received"
WARN_ECHO_MISSING = "requestState not echoed: the last input_required result carried one"
WARN_ECHO_INVENTED = "requestState sent, but the last input_required result carried none"
WARN_LEAK = "requestState or inputResponses on a request that belongs to no flow"
DEFAULT_MAX_FLOWS = 4096

_CREDENTIAL_NAMES = frozenset(
    {
        "authorization",
        "proxyauthorization",
        "cookie",
        "setcookie",
        "xapikey",
        "apikey",
        "token",
        "accesstoken",
        "refreshtoken",
        "idtoken",
        "authtoken",
        "bearertoken",
        "sessiontoken",
        "clientsecret",
        "secret",
        "password",
        "passwd",
        "passphrase",
        "privatekey",
        "credential",
        "credentials",
        "codeverifier",
        "clientassertion",
    }
)
_CREDENTIAL_SUFFIXES = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "apikey",
    "accesstoken",
    "refreshtoken",
    "idtoken",
    "authtoken",
    "sessiontoken",
    "privatekey",
    "credentials",
    "codeverifier",
)
_SCHEME_CREDENTIAL = re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+", re.IGNORECASE)
_URL_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]+:)[^@\s/]+@")
_QUERY_CREDENTIAL = re.compile(
    r"([?&#](?:access_token|refresh_token|id_token|token|api_key|apikey|key|password|secret"
    r"|client_secret|client_assertion|assertion|code|code_verifier)=)"
    r"[^&#\s]+",
    re.IGNORECASE,
)
#: A form body that starts with a credential (``code=...&state=...``: no ``?`` before it).
_LEADING_CREDENTIAL = re.compile(
    r"^((?:access_token|refresh_token|id_token|client_secret|client_assertion|code"
    r"|code_verifier)=)[^&#\s]+",
    re.IGNORECASE,
)


def is_credential_name(name: str) -> bool:
    """Whether an object member called ``name`` holds a credential."""
    normalized = re.sub(r"[-_\s]", "", name.lower())
    return normalized in _CREDENTIAL_NAMES or normalized.endswith(_CREDENTIAL_SUFFIXES)


def redact_text(text: str) -> str:
    """``text`` with bearer/basic credentials, URL passwords and credential query values hidden."""
    text = _SCHEME_CREDENTIAL.sub(lambda mt: f"{mt.group(1)} {REDACTED}", text)
    text = _URL_PASSWORD.sub(lambda mt: f"{mt.group(1)}{REDACTED}@", text)
    text = _LEADING_CREDENTIAL.sub(lambda mt: f"{mt.group(1)}{REDACTED}", text)
    return _QUERY_CREDENTIAL.sub(lambda mt: f"{mt.group(1)}{REDACTED}", text)


def redact(value: Any) -> Any:
    """A copy of a JSON value with every credential replaced by ``"[REDACTED]"``.

    Walked with a work list, not recursion: a message nested a thousand deep is
    traced like any other.
    """
    top: list[Any] = [None]
    work: list[tuple[Any, Any, Any]] = [(top, 0, value)]  # (where the copy goes, slot, what)
    while work:
        target, slot, item = work.pop()
        if isinstance(item, Mapping):
            members: dict[Any, Any] = {}
            for key, member in item.items():
                if key == "requestState":
                    members[key] = member
                elif is_credential_name(str(key)):
                    members[key] = REDACTED
                else:
                    members[key] = None  # (holds the member's place: the order is kept)
                    work.append((members, key, member))
            target[slot] = members
        elif isinstance(item, (list, tuple)):
            elements: list[Any] = [None] * len(item)
            work.extend((elements, index, element) for index, element in enumerate(item))
            target[slot] = elements
        elif isinstance(item, str):
            target[slot] = redact_text(item)
        else:
            target[slot] = item
    return top[0]


def line_text(line: Mapping[str, Any]) -> str:
    """One trace line as compact JSON text, however deep the message nests."""
    try:
        return json.dumps(line, ensure_ascii=False, default=str)
    except RecursionError:  # the C encoder recurses per level: the slower iterative one
        return json_text.dumps(line, indent=None, default=str)


class NdjsonTracer:
    """Writes trace records as NDJSON to ``stream`` and checks requestState echoes.

    ``start`` is the time (on the records' clock) that ``t`` counts from; when
    ``None`` the first record's time is used.  The tracer does not close
    ``stream`` unless it opened it (:meth:`open`).
    """

    def __init__(
        self,
        stream: IO[str],
        *,
        start: float | None = None,
        max_flows: int = DEFAULT_MAX_FLOWS,
    ) -> None:
        self.stream = stream
        self.start = start
        self.max_flows = max_flows
        self.warnings: list[str] = []
        self._owned = False
        # flow -> the requestState of its last input_required result (None: it had none).
        self._expected: dict[int, str | None] = {}
        # leg id -> flow, for responses recorded without their flow.
        self._flow_of_id: dict[Any, int] = {}

    @classmethod
    def open(cls, path: str, *, start: float | None = None) -> NdjsonTracer:
        """A tracer writing to a new file at ``path`` (UTF-8, truncated).

        A lone surrogate in a string (the standard library's JSON reader lets
        ``"\\ud800"`` in) cannot be UTF-8: it is written as its JSON escape.
        """
        file = open(path, "w", encoding="utf-8", errors="backslashreplace")  # noqa: SIM115
        tracer = cls(file, start=start)
        tracer._owned = True
        return tracer

    def close(self) -> None:
        if self._owned:
            self.stream.close()

    def __call__(self, record: TraceRecord) -> None:
        if self.start is None:
            self.start = record.t
        msg = record.msg
        flow = record.flow
        warning: str | None = None
        if record.dir == "send":
            if flow is not None and "id" in msg:
                self._remember(self._flow_of_id, msg["id"], flow)
            warning = self._check_sent(flow, msg)
        else:
            if "method" not in msg:  # a response: its leg is answered
                mapped = self._flow_of_id.pop(msg.get("id"), None)
                flow = mapped if flow is None else flow
            if flow is not None:
                self._note_received(flow, msg)
        line: dict[str, Any] = {
            "dir": record.dir,
            "t": round(record.t - self.start, 6),
            "flow": flow,
            "round": record.round,
            "msg": redact(msg),
        }
        if warning is not None:
            line["warning"] = warning
            self.warnings.append(warning)
        self.stream.write(line_text(line) + "\n")
        self.stream.flush()

    def _remember(self, table: dict[Any, Any], key: Any, value: Any) -> None:
        table.pop(key, None)
        table[key] = value
        while len(table) > self.max_flows:
            del table[next(iter(table))]

    def _note_received(self, flow: int, msg: Mapping[str, Any]) -> None:
        result = msg.get("result")
        if isinstance(result, Mapping) and result.get("resultType") == "input_required":
            state = result.get("requestState")
            self._remember(self._expected, flow, state if isinstance(state, str) else None)
        elif "result" in msg or "error" in msg:
            self._expected.pop(flow, None)  # the flow ended

    def _check_sent(self, flow: int | None, msg: Mapping[str, Any]) -> str | None:
        params = msg.get("params")
        if "method" not in msg or not isinstance(params, Mapping):
            return None
        if flow is None:
            if "requestState" in params or "inputResponses" in params:
                return WARN_LEAK
            return None
        if flow not in self._expected:
            return None  # the flow's first leg (or a re-issue of it)
        expected = self._expected[flow]
        sent = params.get("requestState")
        if expected is None:
            return WARN_ECHO_INVENTED if "requestState" in params else None
        if "requestState" not in params:
            return WARN_ECHO_MISSING
        return None if sent == expected else WARN_ECHO_DIFFERS
