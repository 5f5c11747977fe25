"""The person's time is not the server's: a client's timers stop while a person is at
work for it (signing in at the authorization server in their browser), and start
again, whole, when they are done.

The model: every bound the client puts on the server (the handshake's
``handshake_timeout``, each leg's and each request's ``timeout``) measures how long
the *server* takes.  An OAuth flow that needs a person (the user agent of
:class:`~mrtr_transports.client.oauth.OAuthProvider`: a browser, a login form, a
password typed) runs inside the request the server refused with a 401, so without
this rule a sign-in of more than ten seconds would time out the handshake.  The
provider marks the person's time with :meth:`PersonTime.at_work`; the client's
timers sleep with :meth:`PersonTime.server_sleep`, which only counts time when no
person is at work.  (The same rule as a 2025 server's question answered inside a
leg: ``Flow.answering_started``.)  The person's own time has its own bound (the
user agent's, e.g. ``mrtr call --login-timeout``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import anyio

__all__ = ["PersonTime", "server_sleep"]


class PersonTime:
    """Whether a person is at work for the client now; the timers' sleep."""

    def __init__(self) -> None:
        self._working = 0
        self._changed: anyio.Event | None = None  # (made on the loop, when first awaited)

    @property
    def working(self) -> bool:
        return self._working > 0

    @contextmanager
    def at_work(self) -> Iterator[None]:
        """The block is the person's time (nestable)."""
        self._working += 1
        self._signal()
        try:
            yield
        finally:
            self._working -= 1
            self._signal()

    def _signal(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def _change(self) -> None:
        if self._changed is None:
            self._changed = anyio.Event()
        await self._changed.wait()

    async def server_sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` during which no person was at work; a person's time in the
        middle starts the sleep again, whole, when they are done."""
        while True:
            while self._working:
                await self._change()
            with anyio.move_on_after(max(seconds, 0.0)) as sleeping:
                while not self._working:
                    await self._change()
            if sleeping.cancel_called:
                return


async def server_sleep(person: PersonTime | None, seconds: float) -> None:
    """Sleep ``seconds`` of the server's time: all of it where no person works for the
    client (``person`` ``None``: a link with no OAuth provider)."""
    if person is None:
        await anyio.sleep(max(seconds, 0.0))
    else:
        await person.server_sleep(seconds)
