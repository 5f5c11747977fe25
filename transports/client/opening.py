"""A client opened over a link: the session open on entry, everything shut on exit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Unpack

import anyio

from .client import Client
from .link import ClientOptions, Link

__all__ = ["open_client"]


def _single(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """The one exception in ``group`` (however nested), or None if there are several."""
    found: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                walk(inner)
        else:
            found.append(exc)

    walk(group)
    return found[0] if len(found) == 1 else None


@asynccontextmanager
async def open_client(link: Link, **client_options: Unpack[ClientOptions]) -> AsyncIterator[Client]:
    """A :class:`Client` over ``link``, its session open (the era settled) on entry,
    the link shut down on exit.  Options as for :class:`Client`."""
    try:
        async with anyio.create_task_group() as task_group:
            client = Client(link, task_group, **client_options)
            try:
                await link.start(client, task_group)
                await client._open()
                yield client
            finally:
                await client.aclose()
    except BaseExceptionGroup as group:
        # Link tasks never raise, so a group carries the caller's own exception: unwrap it.
        single = _single(group)
        if single is None:
            raise
        raise single from single.__cause__  # (keeps its cause, hides the group)
