"""URL-mode elicitation through a provider that redirects back: the sans-IO parts.

The model (``docs/url-elicitation.md``): a tool needs the user to visit a
provider (an OAuth-style authorization page).  The server registers a pending
*interaction* under an unguessable routing prefix, rewrites the provider URL so
that its ``state`` parameter is ``<prefix>.<the provider's own state>`` and its
``redirect_uri`` is the server's own callback endpoint, and asks a URL
elicitation with that URL.  The provider sends the user's browser back to the
callback with ``state`` (and ``code``, or ``error``); the prefix finds the
interaction and settles it.  The tool's next retry reads the outcome.

Here, with time passed in as ``now``:

* :func:`rewrite_provider_url` and :func:`split_state`: the URL's ``state`` and
  ``redirect_uri``, and the prefix back out of a returned ``state``;
* :func:`read_callback`: a callback's query string, bounded, as a
  :class:`Callback` (``code`` -> completed, ``error=access_denied`` ->
  declined, any other ``error`` -> failed);
* :class:`Interaction` and :data:`INTERACTION_TRANSITIONS`: pending -> completed | declined
  | failed | expired, nothing else (a settled interaction is never settled again,
  so a replayed callback is refused);
* :class:`MemoryInteractions`: a bounded table of interactions that expire.

The state is a capability: whoever holds it can settle the interaction once.
It does not say *who* came back; an app that must know (the same person who
started the flow) checks the provider's identity itself.
"""

from __future__ import annotations

import enum
import re
import secrets
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import attrs

from .._errors import INTERNAL_ERROR, INVALID_REQUEST, LocalProtocolError, MrtrError, describe
from ._ask_rules import check_elicitation_url

#: The routing prefix: 32 URL-safe characters (192 random bits), never a ``.``.
PREFIX_BYTES = 24
_PREFIX = re.compile(r"[A-Za-z0-9_-]{32}")
#: The most of a callback's query string that is read (a provider's is far shorter).
MAX_CALLBACK_QUERY = 8 * 1024
#: The most a provider's own ``state`` may be (it travels inside ours).
MAX_PROVIDER_STATE = 1024
DEFAULT_INTERACTION_TTL = 600.0
DEFAULT_MAX_INTERACTIONS = 10_000
STATE_PARAM = "state"
REDIRECT_PARAM = "redirect_uri"


class InteractionStatus(enum.Enum):
    PENDING = "pending"
    COMPLETED = "completed"
    DECLINED = "declined"
    FAILED = "failed"
    EXPIRED = "expired"


class InteractionEvent(enum.Enum):
    """What can happen to an interaction: a callback of one of three kinds, or time."""

    CODE = "code"  # the provider came back with a result (``code``)
    DENIED = "access_denied"  # the user refused at the provider
    ERROR = "error"  # the provider came back with another ``error``
    TIMED_OUT = "timed_out"  # ``now`` passed ``expires_at``


#: Every allowed (status, event) and the status it leads to; nothing leaves a settled status.
INTERACTION_TRANSITIONS: Mapping[tuple[InteractionStatus, InteractionEvent], InteractionStatus] = {
    (InteractionStatus.PENDING, InteractionEvent.CODE): InteractionStatus.COMPLETED,
    (InteractionStatus.PENDING, InteractionEvent.DENIED): InteractionStatus.DECLINED,
    (InteractionStatus.PENDING, InteractionEvent.ERROR): InteractionStatus.FAILED,
    (InteractionStatus.PENDING, InteractionEvent.TIMED_OUT): InteractionStatus.EXPIRED,
}


class BadCallback(MrtrError):
    """A callback request that is not one a provider sends (HTTP 400): no ``state``,
    two of it, neither ``code`` nor ``error``, a query too long or not UTF-8."""

    code = INVALID_REQUEST


class InteractionGone(MrtrError):
    """No pending interaction for this state (HTTP 410): unknown, already settled or
    expired.  ``reason`` says which (the page shown to the browser does not)."""

    code = INVALID_REQUEST

    def __init__(self, reason: str) -> None:
        super().__init__(
            f"no pending interaction for this state ({reason})", data={"reason": reason}
        )
        self.reason = reason


class InteractionStoreFull(MrtrError):
    """Too many interactions are pending to register another: refused, not evicted
    (evicting would turn someone's sign-in, half done in a browser, into a 410)."""

    code = INTERNAL_ERROR


def new_prefix() -> str:
    """A fresh routing prefix (unguessable; URL-safe; no ``.``)."""
    return secrets.token_urlsafe(PREFIX_BYTES)


def split_state(value: str) -> tuple[str, str | None]:
    """A returned ``state`` as (our prefix, the provider's own state or ``None``).

    Raises :class:`InteractionGone` (``unknown``) when it does not start with a
    prefix we could have made: to the browser, a state we never issued is as
    unknown as one that expired (410), and saying which would help a prober.
    """
    prefix, dot, original = value.partition(".")
    if not _PREFIX.fullmatch(prefix):
        raise InteractionGone("unknown")
    return prefix, original if dot else None


def rewrite_provider_url(url: str, *, prefix: str, callback_url: str) -> tuple[str, str | None]:
    """``url`` with ``state=<prefix>[.<its state>]`` and ``redirect_uri=callback_url``;
    also the provider's own state (``None`` if it had none).

    Other parameters keep their order; the fragment is kept.  Raises
    ``LocalProtocolError`` for a URL no user may be sent to, a callback URL that
    is not absolute, a prefix we did not make, or a URL with two ``state`` or
    two ``redirect_uri`` parameters (which one would the provider read?).
    """
    check_elicitation_url(url)
    try:
        check_elicitation_url(callback_url)
    except LocalProtocolError as exc:
        raise LocalProtocolError(f"the callback URL: {exc}") from exc
    if not _PREFIX.fullmatch(prefix):
        raise LocalProtocolError("the prefix must come from new_prefix()")
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    original: str | None = None
    for name in (STATE_PARAM, REDIRECT_PARAM):
        found = [value for key, value in pairs if key == name]
        if len(found) > 1:
            raise LocalProtocolError(f"the provider URL has {len(found)} {name!r} parameters")
        if name == STATE_PARAM and found:
            original = found[0]
    if original is not None and len(original) > MAX_PROVIDER_STATE:
        raise LocalProtocolError(f"the provider's state is longer than {MAX_PROVIDER_STATE}")
    state = prefix if original is None else f"{prefix}.{original}"
    kept = [(k, v) for k, v in pairs if k not in (STATE_PARAM, REDIRECT_PARAM)]
    query = urlencode([*kept, (REDIRECT_PARAM, callback_url), (STATE_PARAM, state)])
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment)), original


@attrs.frozen(kw_only=True)
class Callback:
    """A callback request read: whose it is (``prefix``) and what it says."""

    prefix: str
    provider_state: str | None
    event: InteractionEvent
    #: Every other query parameter (``code``, ``iss``, ``scope``, ...), ``state`` left out.
    params: Mapping[str, str]
    #: The provider's ``error`` (``None`` for a result).
    error: str | None = None


def read_callback(query: str | bytes) -> Callback:
    """A callback's query string (without the ``?``) as a :class:`Callback`.

    Raises :class:`BadCallback` past :data:`MAX_CALLBACK_QUERY` bytes, for bytes
    that are not UTF-8, a parameter given twice, a missing ``state``, or neither
    ``code`` nor ``error``; :class:`InteractionGone` for a ``state`` without a
    routing prefix this server could have made.
    """
    if len(query) > MAX_CALLBACK_QUERY:
        raise BadCallback(f"the callback's query is longer than {MAX_CALLBACK_QUERY} bytes")
    if isinstance(query, bytes):
        try:
            query = query.decode("ascii")
        except UnicodeDecodeError as exc:
            raise BadCallback("the callback's query is not URL-encoded ASCII") from exc
    try:
        pairs = parse_qsl(query, keep_blank_values=True, errors="strict")
    except UnicodeDecodeError as exc:
        raise BadCallback("the callback's query is not UTF-8") from exc
    params: dict[str, str] = {}
    for key, value in pairs:
        if key in params:
            raise BadCallback(f"the callback has {describe(key)} twice")
        params[key] = value
    state = params.pop(STATE_PARAM, None)
    if state is None:
        raise BadCallback("the callback has no state")
    prefix, provider_state = split_state(state)
    error = params.get("error")
    if error is not None:
        event = InteractionEvent.DENIED if error == "access_denied" else InteractionEvent.ERROR
    elif "code" in params:
        event = InteractionEvent.CODE
    else:
        raise BadCallback("the callback has neither code nor error")
    return Callback(
        prefix=prefix, provider_state=provider_state, event=event, params=params, error=error
    )


@attrs.frozen(kw_only=True)
class Interaction:
    """One user visit to a provider, from the ask to its outcome.

    ``id`` is the routing prefix; ``key`` the input key it was asked under;
    ``flow`` and ``principal`` the flow and caller it belongs to (a retry of
    another flow does not read it).
    """

    id: str
    key: str
    flow: str
    principal: str | None
    provider_state: str | None
    created_at: float
    expires_at: float
    status: InteractionStatus = InteractionStatus.PENDING
    #: What the callback brought (``code`` and the rest), once completed (or failed).
    params: Mapping[str, str] = attrs.field(factory=dict)
    error: str | None = None

    def status_at(self, now: float) -> InteractionStatus:
        """The status at ``now``: a pending interaction past ``expires_at`` has expired."""
        if self.status is InteractionStatus.PENDING and now >= self.expires_at:
            return INTERACTION_TRANSITIONS[self.status, InteractionEvent.TIMED_OUT]
        return self.status

    def settle(self, callback: Callback, now: float) -> Interaction:
        """The interaction after ``callback`` arrived at ``now``.

        Raises :class:`InteractionGone` when it is no longer pending (settled
        before: a replay; or expired).
        """
        status = self.status_at(now)
        after = INTERACTION_TRANSITIONS.get((status, callback.event))
        if after is None:
            raise InteractionGone(status.value)
        return attrs.evolve(self, status=after, params=dict(callback.params), error=callback.error)

    def to_json(self) -> dict[str, Any]:
        """A plain JSON-able value (for a shared store); :meth:`from_json` reads it."""
        return {
            "id": self.id,
            "key": self.key,
            "flow": self.flow,
            "principal": self.principal,
            "provider_state": self.provider_state,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "status": self.status.value,
            "params": dict(self.params),
            "error": self.error,
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> Interaction:
        return cls(
            id=value["id"],
            key=value["key"],
            flow=value["flow"],
            principal=value["principal"],
            provider_state=value["provider_state"],
            created_at=float(value["created_at"]),
            expires_at=float(value["expires_at"]),
            status=InteractionStatus(value["status"]),
            params=dict(value["params"]),
            error=value["error"],
        )


def begin_interaction(
    provider_url: str,
    *,
    key: str,
    callback_url: str,
    flow: str,
    principal: str | None,
    now: float,
    ttl: float = DEFAULT_INTERACTION_TTL,
) -> tuple[Interaction, str]:
    """A new pending interaction and the rewritten URL to ask the user to visit."""
    if not ttl > 0:
        raise LocalProtocolError("ttl must be a positive number of seconds")
    prefix = new_prefix()
    url, original = rewrite_provider_url(provider_url, prefix=prefix, callback_url=callback_url)
    interaction = Interaction(
        id=prefix,
        key=key,
        flow=flow,
        principal=principal,
        provider_state=original,
        created_at=now,
        expires_at=now + ttl,
    )
    return interaction, url


class MemoryInteractions:
    """A bounded in-memory table of interactions, each kept until it expires.

    ``register`` refuses (:class:`InteractionStoreFull`) once ``max_entries``
    are live, after dropping the expired ones: a flood of new flows cannot push
    out a sign-in a person is in the middle of.
    """

    def __init__(self, max_entries: int = DEFAULT_MAX_INTERACTIONS) -> None:
        if not isinstance(max_entries, int) or max_entries < 1:
            raise LocalProtocolError("max_entries must be a positive integer")
        self.max_entries = max_entries
        self._entries: OrderedDict[str, Interaction] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def _purge(self, now: float, *, sweep: bool) -> None:
        """Drop expired entries: from the oldest while they are expired, or all (sweep)."""
        for entry_id, entry in list(self._entries.items()):
            if now >= entry.expires_at:
                del self._entries[entry_id]
            elif not sweep:
                return

    def register(self, interaction: Interaction, now: float) -> None:
        self._purge(now, sweep=False)
        if len(self._entries) >= self.max_entries:
            self._purge(now, sweep=True)
        if len(self._entries) >= self.max_entries:
            raise InteractionStoreFull(
                f"{self.max_entries} provider interactions are pending: try again later"
            )
        self._entries[interaction.id] = interaction

    def get(self, interaction_id: str, now: float) -> Interaction | None:
        """The interaction (any status), or ``None`` when unknown or expired."""
        entry = self._entries.get(interaction_id)
        if entry is not None and now >= entry.expires_at:
            del self._entries[interaction_id]
            return None
        return entry

    def settle(self, callback: Callback, now: float) -> Interaction:
        """Settle the interaction ``callback`` names (:class:`InteractionGone`: none pending)."""
        entry = self.get(callback.prefix, now)
        if entry is None:
            raise InteractionGone("unknown or expired")
        settled = entry.settle(callback, now)
        self._entries[entry.id] = settled
        return settled

    def discard(self, interaction_id: str) -> None:
        """Forget an interaction (its outcome was read)."""
        self._entries.pop(interaction_id, None)


__all__ = [
    "DEFAULT_INTERACTION_TTL",
    "DEFAULT_MAX_INTERACTIONS",
    "MAX_CALLBACK_QUERY",
    "MAX_PROVIDER_STATE",
    "INTERACTION_TRANSITIONS",
    "BadCallback",
    "Callback",
    "Interaction",
    "InteractionEvent",
    "InteractionGone",
    "InteractionStatus",
    "InteractionStoreFull",
    "MemoryInteractions",
    "begin_interaction",
    "new_prefix",
    "read_callback",
    "rewrite_provider_url",
    "split_state",
]
