"""URL elicitation through a provider that sends the browser back: ``ctx.ask_provider``.

The model (``docs/url-elicitation.md``): a re-entrant tool handler calls::

    outcome = await ctx.ask_provider("login", "https://provider.example/authorize?...",
                                     message="Sign in to the provider")
    if outcome.ask is not None:
        return outcome.ask            # an input_required round (or a state-only one)
    if outcome.status == "completed":
        token = exchange(outcome.code)   # the app's own business with the provider

On the first leg the helper registers a pending interaction in the app's
:class:`InteractionStore` (bounded, expiring), rewrites the URL (``state``
carries the interaction's unguessable prefix, ``redirect_uri`` points at the
HTTP server's callback) and asks a URL elicitation; the sealed ``requestState``
carries the interaction's id.  The provider redirects the browser to the
callback, which settles the interaction (``transports/asgi/callback.py``).
Each retry reads it:

* completed -> ``status == "completed"`` with the callback's ``params``
  (``code``, ...) and the provider's own ``provider_state``; the interaction is
  forgotten (its code is read once);
* declined (``error=access_denied`` at the provider, or the user refused
  consent to open the URL) -> ``"declined"``; another provider ``error`` ->
  ``"failed"``: the tool says so (the example answers a tool error);
* still pending -> ``outcome.ask`` is a requestState-only round: the client
  polls, paced, and its human-wait bound applies, not its server-time ones;
* expired or lost (past the interaction's ``ttl``, a restarted in-memory store)
  -> a fresh interaction and a fresh URL, asked again (a new input round: the
  client's ``max_rounds`` bounds how often).

Each client has a share of the pending interactions (``MemoryInteractionStore``'s
``max_per_client``, keyed by ``Context.client``): one that holds its share gets
-32000 naming the bound, and every other client's flows go on.

Re-entrant handlers only (a continuation's ``wait_for`` cannot wait out
state-only rounds).  While the flow is pending the leg's sealed state is the
helper's; pass ``state=`` to carry a value of your own (``outcome.state``).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol

import attrs

import mrtr_core as m

from .._shares import ClientShares
from ..asgi.callback import CURRENT_CALLBACK_URL

if TYPE_CHECKING:
    from .context import Context

__all__ = [
    "DEFAULT_MAX_INTERACTIONS_PER_CLIENT",
    "InteractionStore",
    "MemoryInteractionStore",
    "ProviderOutcome",
    "UrlFlows",
]

#: The key of the helper's part of a leg's sealed state.
_STATE_KEY = "mrtr.url_flow"

Status = Literal["completed", "declined", "failed", "pending"]


class InteractionStore(Protocol):
    """Where pending interactions live between the ask, the callback and the retry.

    Shared by every process that serves the callback or a leg of the flow (a
    database, Redis) in a deployment of several; ``settle`` must be atomic (one
    callback settles an interaction, a second gets ``InteractionGone``).
    ``register`` counts the interaction against ``client``'s share (the
    ``Context.client`` that began it) and raises an ``MrtrError`` past the
    client's share or the store's bound (``ShareRefusal.error()``: -32000).
    """

    async def register(
        self, interaction: m.server.Interaction, now: float, *, client: str
    ) -> None: ...

    async def get(self, interaction_id: str, now: float) -> m.server.Interaction | None: ...

    async def settle(self, callback: m.server.Callback, now: float) -> m.server.Interaction: ...

    async def discard(self, interaction_id: str) -> None: ...


#: One client's share of the pending interactions (a person signs in to a few
#: providers at once, not hundreds).
DEFAULT_MAX_INTERACTIONS_PER_CLIENT = 100


class MemoryInteractionStore:
    """The in-process :class:`InteractionStore`: the core's bounded ``MemoryInteractions``,
    ``max_entries`` pending in all, at most ``max_per_client`` begun by one client."""

    def __init__(
        self,
        max_entries: int = m.server._url_flows.DEFAULT_MAX_INTERACTIONS,
        *,
        max_per_client: int = DEFAULT_MAX_INTERACTIONS_PER_CLIENT,
    ) -> None:
        self.table = m.server.MemoryInteractions(max_entries)
        self.shares = ClientShares(
            max_entries,
            max_per_client,
            what="pending URL interactions",
            total_setting="interactions max_entries",
            per_client_setting="interactions max_per_client",
        )
        #: Each interaction counted: its client (whose share it frees when it goes).
        self._client_of: dict[str, str] = {}
        #: (expires_at, id), soonest first: when an interaction frees its share unread.
        self._expiries: list[tuple[float, str]] = []

    def __len__(self) -> int:
        return len(self.table)

    async def register(self, interaction: m.server.Interaction, now: float, *, client: str) -> None:
        self._expire(now)
        refused = self.shares.admit(client)
        if refused is not None:
            raise refused.error(m.server.InteractionStoreFull)
        try:
            self.table.register(interaction, now)
        except BaseException:
            self.shares.release(client)
            raise
        self._client_of[interaction.id] = client
        heapq.heappush(self._expiries, (interaction.expires_at, interaction.id))

    async def get(self, interaction_id: str, now: float) -> m.server.Interaction | None:
        found = self.table.get(interaction_id, now)
        if found is None:
            self._forget(interaction_id)
        return found

    async def settle(self, callback: m.server.Callback, now: float) -> m.server.Interaction:
        return self.table.settle(callback, now)

    async def discard(self, interaction_id: str) -> None:
        self.table.discard(interaction_id)
        self._forget(interaction_id)

    def _expire(self, now: float) -> None:
        """Free the shares of the interactions expired by ``now`` (the table drops them)."""
        expiries = self._expiries
        while expiries and now >= expiries[0][0]:
            self._forget(heapq.heappop(expiries)[1])

    def _forget(self, interaction_id: str) -> None:
        client = self._client_of.pop(interaction_id, None)
        if client is not None:
            self.shares.release(client)


@attrs.frozen(kw_only=True)
class ProviderOutcome:
    """What ``ask_provider`` found on this leg.

    ``ask`` is set exactly when ``status`` is ``"pending"``: return it.
    """

    status: Status
    ask: m.server.Ask | None = None
    #: The callback's parameters but ``state`` (``code``, ``iss``, ``scope``, ...).
    params: Mapping[str, str] = attrs.field(factory=dict)
    #: The provider's ``error`` (``access_denied``, ...), or ``"consent_declined"`` /
    #: ``"cancelled"`` when the user did not agree to open the URL.
    error: str | None = None
    #: The ``state`` the provider URL had before it was rewritten.
    provider_state: str | None = None
    #: The value passed as ``state=`` to ``ask_provider`` (carried across the legs).
    state: Any = None

    @property
    def code(self) -> str | None:
        return self.params.get("code")


class UrlFlows:
    """An app's URL flows: the store, their lifetime, where the browser comes back.

    ``callback_url`` (absolute) overrides the one of the HTTP server serving the
    request (its ``public_url``, else its address, plus the callback path): set it
    when the callback is served elsewhere.  ``ttl``: how long a user has to finish
    at the provider.  ``clock``: wall-clock seconds, shared by every process (the
    app's clock).
    """

    def __init__(
        self,
        store: InteractionStore | None = None,
        *,
        ttl: float = m.server._url_flows.DEFAULT_INTERACTION_TTL,
        callback_url: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not ttl > 0:
            raise ValueError("ttl must be a positive number of seconds")
        self.store: InteractionStore = store if store is not None else MemoryInteractionStore()
        self.ttl = ttl
        self.callback_url = callback_url
        self.clock = clock

    def now(self) -> float:
        return self.clock()

    async def settle(self, callback: m.server.Callback, now: float) -> m.server.Interaction:
        """The callback route's way in: settle the interaction ``callback`` names."""
        return await self.store.settle(callback, now)

    async def ask_provider(
        self, ctx: Context, key: str, provider_url: str, *, message: str, state: Any = None
    ) -> ProviderOutcome:
        """One leg of a provider flow for ``ctx``'s handler (see the module)."""
        asked = m.wire.ElicitUrlRequest(message=message, url=provider_url, mode="url")
        mine = _helper_state(ctx.state, key)
        if mine is not None:
            found = await self.store.get(mine["i"], ctx.now)
            if found is not None and (found.flow, found.principal) == (ctx.flow, ctx.principal):
                return await self._read(ctx, key, asked, found, mine)
            # Expired or lost (or, never expected, another flow's): begin again.
            state = mine.get("v")
        return await self._begin(ctx, key, provider_url, message, state)

    async def _read(
        self,
        ctx: Context,
        key: str,
        asked: m.wire.ElicitUrlRequest,
        found: m.server.Interaction,
        mine: Mapping[str, Any],
    ) -> ProviderOutcome:
        user_state = mine.get("v")
        status = found.status_at(ctx.now)
        settled = {
            m.server.InteractionStatus.COMPLETED: "completed",
            m.server.InteractionStatus.DECLINED: "declined",
            m.server.InteractionStatus.FAILED: "failed",
        }.get(status)
        if settled is not None:
            await self.store.discard(found.id)  # read once: its code is not handed out twice
            return ProviderOutcome(
                status=settled,  # type: ignore[arg-type]
                params=dict(found.params),
                error=found.error,
                provider_state=found.provider_state,
                state=user_state,
            )
        answer = ctx.answer(key, asked)
        if isinstance(answer, m.wire.ElicitResult) and answer.action != "accept":
            await self.store.discard(found.id)  # the user would not open the URL
            reason = "consent_declined" if answer.action == "decline" else "cancelled"
            return ProviderOutcome(
                status="declined",
                error=reason,
                provider_state=found.provider_state,
                state=user_state,
            )
        # Consented (or a state-only retry): not back from the provider yet. Poll.
        poll = ctx.ask(state=dict(ctx.state))
        return ProviderOutcome(status="pending", ask=poll, state=user_state)

    async def _begin(
        self, ctx: Context, key: str, provider_url: str, message: str, state: Any
    ) -> ProviderOutcome:
        callback_url = self.callback_url or CURRENT_CALLBACK_URL.get()
        if callback_url is None:
            raise m.LocalProtocolError(
                "no callback endpoint for a provider flow: serve the app over HTTP "
                "(mrtr serve --http) or set app.url_flows.callback_url"
            )
        probe = m.server.elicit_url(message, provider_url)
        if not ctx.can_ask(probe):
            ctx.ask({key: probe})  # raises CapabilityRequired (-32021) before anything is stored
        ttl = min(self.ttl, ctx.deadline - ctx.now)
        interaction, url = m.server.begin_interaction(
            provider_url,
            key=key,
            callback_url=callback_url,
            flow=ctx.flow,
            principal=ctx.principal,
            now=ctx.now,
            ttl=ttl,
        )
        await self.store.register(interaction, ctx.now, client=ctx.client)
        mine = {"k": key, "i": interaction.id, "v": state}
        ask = ctx.ask({key: m.server.elicit_url(message, url)}, state={_STATE_KEY: mine})
        return ProviderOutcome(status="pending", ask=ask, state=state)


def _helper_state(value: Any, key: str) -> Mapping[str, Any] | None:
    """The helper's part of a leg's verified state for ``key``, if it is there."""
    if not isinstance(value, Mapping):
        return None
    mine = value.get(_STATE_KEY)
    if isinstance(mine, Mapping) and mine.get("k") == key and isinstance(mine.get("i"), str):
        return mine
    return None
