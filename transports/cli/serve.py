"""The one way a server starts from a command line: ``mrtr serve``.

::

    mrtr serve [--stdio | --http HOST:PORT | --ws HOST:PORT] [--loop LOOP] [OPTIONS]
    python -m mrtr_transports serve ...   (the same command)

It runs these steps, in this order:

1. parse the options (:mod:`~mrtr_transports.cli.serve_options`); a usage error
   exits 2 before anything else happens;
2. send logging to stderr (``--log-level``, default ``WARNING``;
   :mod:`~mrtr_transports.cli.serve_logging`);
3. stdio only: guard stdout (:func:`~mrtr_transports.server.stdio.guard_stdout`).
   From here on fd 1 and ``sys.stdout`` point at stderr, so whatever the app
   prints, at import time or in a handler, never reaches the protocol stream;
4. load the app (``--app MODULE:ATTR``, default the example app;
   :mod:`~mrtr_transports.cli.app_loading`); a module
   that cannot be imported, or an attribute that is not a ``ServerApp``, exits
   2 with a message that says what to fix;
5. serve, on the event loop ``--loop`` names (``trio``, the default, or ``asyncio``;
   ``uvloop`` where it is installed; ``anyio.run`` runs the whole command): stdio until
   the end of stdin; HTTP (:class:`~mrtr_transports.server.http.HttpServer`: the one
   endpoint, ``McpAsgi``, on the project's ASGI host, the same on every loop) until
   Ctrl-C or SIGTERM, announcing
   ``mrtr serve: listening on http://HOST:PORT/PATH`` on stderr once it accepts
   connections; WebSocket
   (``--ws``, :mod:`~mrtr_transports.server.ws`) likewise, with ``ws://HOST:PORT/PATH``.
   ``--path``, ``--allow-*``, ``--trusted-proxy`` and ``--max-connections`` apply to
   it as to HTTP; ``--max-message-size``, ``--ping-interval`` and ``--ping-timeout``
   only to it.

Shared state (HTTP only; ``docs/deploying.md``): several ``mrtr serve --http``
workers behind one load balancer serve any leg of any flow when they seal with
the same keys (``--state-keys FILE``, or ``env:NAME``: a JSON document, see
:mod:`mrtr_transports.stores.keys`) and spend redeemed states in one store
(``--single-use redis://HOST:PORT/DB``, which needs ``--state-keys``).  The
command hands both to ``app.configure_state`` before serving, so the app must be
an ``McpApp`` (anything else is a usage error); the store's connections live as
long as the server.  Tasks (SEP-2663) are served by any worker when they live in
one shared store (``--task-store redis://HOST:PORT/DB``, needs ``--state-keys``:
a ``RedisTaskStore`` with the bounds of the app's own store, open while serving;
``--task-lease SEC``: how long a worker's claim on a task it runs lasts unrenewed),
or by the worker that holds them when the load balancer routes the task methods
by their ``Mcp-Name`` header (``--task-id-prefix NAME``: task ids start with
``NAME.``).

Authorization (HTTP and WebSocket; ``docs/auth.md``): ``--auth-issuer URL`` with the
endpoint's public URL (``--auth-audience``, or ``--public-url`` over HTTP; a WebSocket
endpoint is protected as its ``http://`` URL) makes the endpoint an OAuth
resource server that requires that authorization server's tokens, checked as JWTs or
at its introspection endpoint (:mod:`~mrtr_transports.cli.serve_auth`).  With
``--auth-dpop`` and ``--single-use redis://...``, the DPoP proofs seen are kept in that
Redis for every worker (``RedisProofMemory``, open while serving), not per process.

Stopping (one meaning for every transport): the first SIGTERM or Ctrl-C stops
taking new work (stdio stops reading stdin; HTTP and WebSocket answer newcomers
503 with ``Connection: close``, the health check included) and lets the requests
in flight finish for ``--drain-timeout`` seconds (stdio 1, else 10), then cancels
what is left.  The exit is 0 for SIGTERM (``PROG: terminated`` on stderr) and 130
for Ctrl-C (``PROG: interrupted``), one line, never a traceback; a second signal
cuts the drain short (:mod:`mrtr_transports.cli.interrupts`).

Logging goes to stderr at ``--log-level``; at INFO each request gets an access line
(:mod:`mrtr_transports.server.access`; over HTTP the host writes it,
:mod:`mrtr_transports.host.access`; ``--no-access-log`` keeps them out), and an
app that raises leaves its traceback there at ERROR while the client gets a clean
error.  HTTP-only options (``--allow-origin``, ``--allow-host``, ``--trusted-proxy``,
``--state-keys``, ``--single-use``, ``--task-store``, ``--task-id-prefix``,
``--public-url``, ``--callback-path``, ``--health-path``) with stdio are usage errors.
The transports' own modules have no ``main``: nothing but this module starts a
server from a command line, and the server package never imports the command.
"""

from __future__ import annotations

import argparse
import functools
import gc
import logging
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractContextManager, AsyncExitStack, asynccontextmanager, nullcontext
from typing import Any

import anyio

from ..server.app import ServerApp
from ..server.stdio import guard_stdout
from .app_loading import AppSpecError, load_app
from .exit_codes import ExitCode
from .interrupts import interrupted, run_stoppable
from .serve_logging import setup_logging
from .serve_options import LOOPS, ServeOptions, UsageError, add_arguments

__all__ = ["ANNOUNCE", "DESCRIPTION", "PROG", "StopRequest", "main", "serve", "settle_heap"]

log = logging.getLogger("mrtr.cli")

PROG = "mrtr serve"
#: What the stderr line announcing the address starts with.
ANNOUNCE = "mrtr serve: "
DESCRIPTION = "Serve an MCP app (default: the example app) over stdio, HTTP or WebSocket."


class StopRequest:
    """The first SIGTERM or Ctrl-C's request to drain.

    The signal watcher may see the signal before the server has made its event
    (an ``anyio.Event`` can only be made inside the run), so a request is kept
    until the event exists.
    """

    def __init__(self) -> None:
        self._requested = False
        self._event: anyio.Event | None = None

    def set(self) -> None:
        self._requested = True
        if self._event is not None:
            self._event.set()

    async def event(self) -> anyio.Event:
        """The event the server waits on (set already if the request came first)."""
        if self._event is None:
            self._event = anyio.Event()
            if self._requested:
                self._event.set()
        return self._event


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` as ``mrtr serve``'s command line and serve; the exit code."""
    parser = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION)
    add_arguments(parser)
    return serve(parser.parse_args(argv))


def serve(args: argparse.Namespace) -> int:
    """Serve what ``args`` (parsed by :func:`add_arguments`) say, in the module's order."""
    try:
        options = ServeOptions.from_args(args)
    except UsageError as exc:
        return _fail(str(exc))
    setup_logging(options.log_level, access_log=options.access_log)
    guard: AbstractContextManager[Any] = (
        guard_stdout() if options.transport == "stdio" else nullcontext()
    )
    try:
        with guard:  # before the app is imported: its prints go to stderr
            try:
                app = load_app(options.app)
            except AppSpecError as exc:
                return _fail(str(exc))
            except Exception as exc:  # the module's own code failed while importing
                log.debug("importing --app %s failed", options.app, exc_info=True)
                return _fail(f"--app {options.app!r}: importing it failed: {exc!r}")
            if options.state_keys is not None and not _is_mcp_app(app):
                what = f"--app {options.app!r} is not an McpApp (configure_state)"
                return _fail(f"--state-keys: {what}")
            if options.task_id_prefix is not None and not _is_mcp_app(app):
                what = f"--app {options.app!r} is not an McpApp (it serves no tasks)"
                return _fail(f"--task-id-prefix: {what}")
            # The first SIGTERM or Ctrl-C sets `stop`: the server drains (--drain-timeout)
            # and returns; a second one cancels at once (interrupts.py).
            stop = StopRequest()
            if options.transport == "stdio":
                serve_on = _serve_stdio
            elif options.transport == "ws":
                serve_on = _serve_ws
            else:
                serve_on = _serve_http
            settle_heap()
            backend, backend_options = LOOPS[options.loop]
            return run_stoppable(
                PROG,
                functools.partial(serve_on, app, options, stop),
                signals=(signal.SIGINT, signal.SIGTERM),
                on_stop=stop.set,
                backend=backend,
                backend_options=backend_options,
            )
    except KeyboardInterrupt:  # before the signal watcher was up: importing the app
        return interrupted(PROG)


#: The collector's first-generation threshold while serving (CPython's default is 700).
#: A server allocates a few hundred short-lived objects per message, nearly all freed by
#: reference counting; at 700 the collector ran every few messages, walking the young
#: objects of every connection in flight each time.
SERVING_GC_THRESHOLD = 20_000


def settle_heap() -> None:
    """Before serving: what importing the app left on the heap is moved out of the
    collector's reach (``gc.freeze``), and young collections run less often."""
    gc.collect()
    gc.freeze()
    _, second, third = gc.get_threshold()
    gc.set_threshold(SERVING_GC_THRESHOLD, second, third)


def _fail(message: str) -> int:
    sys.stderr.write(f"{PROG}: error: {message}\n")
    sys.stderr.flush()
    return ExitCode.USAGE


async def _serve_stdio(app: ServerApp, options: ServeOptions, stop: StopRequest) -> int:
    from ..server.stdio import serve_stdio

    stopped = await stop.event()
    await serve_stdio(app, drain_timeout=options.drain_timeout, stop=stopped)
    return ExitCode.RESULT


async def _serve_http(app: ServerApp, options: ServeOptions, stop: StopRequest) -> int:
    """``--http``: the MCP endpoint (``McpAsgi``) on the project's ASGI host, on whichever
    loop runs the command (``HttpServer``: each bound to the side whose rule it is)."""
    from ..server.http import HttpServer

    http_options: dict[str, Any] = {
        "path": options.path,
        "allowed_origins": options.allowed_origins or None,
        "allowed_hosts": options.allowed_hosts or None,
        "trusted_proxies": options.trusted_proxies,
        **dict(options.http_bounds),
    }
    if options.public_url is not None:
        http_options["public_url"] = options.public_url
    if options.callback_path is not None:
        http_options["callback_path"] = options.callback_path
    http_options["health_path"] = options.health_path
    async with _shared_state(app, options) as seen_proofs:
        if options.auth is not None:  # (its DPoP proofs kept where the workers share them)
            http_options["auth"] = options.auth.resource_auth(app, seen_proofs=seen_proofs)
        server = HttpServer(app, **http_options)
        async with anyio.create_task_group() as tasks:
            started = await tasks.start(server.serve, options.host, options.port)
            url = _url_of(started, options.host, options.port, options.path)
            sys.stderr.write(f"{ANNOUNCE}listening on {url}\n")
            sys.stderr.flush()
            await (await stop.event()).wait()
            await server.aclose(grace=options.drain_timeout)
    return ExitCode.RESULT


async def _serve_ws(app: ServerApp, options: ServeOptions, stop: StopRequest) -> int:
    from ..server.ws import WsServer

    ws_options: dict[str, Any] = {
        "path": options.path,
        "allowed_origins": options.allowed_origins or None,
        "allowed_hosts": options.allowed_hosts or None,
        "trusted_proxies": options.trusted_proxies,
        **dict(options.http_bounds),  # (only --max-connections gets here)
        **dict(options.ws_bounds),
    }
    if options.auth is not None:  # (the gate checks the upgrade request's token)
        ws_options["auth"] = options.auth.resource_auth(app)
    server = WsServer(app, **ws_options)
    async with _shared_state(app, options), anyio.create_task_group() as tasks:
        host, port = await tasks.start(server.serve, options.host, options.port)
        shown = f"[{host}]" if ":" in host else host
        sys.stderr.write(f"{ANNOUNCE}listening on ws://{shown}:{port}{options.path}\n")
        sys.stderr.flush()
        await (await stop.event()).wait()
        await server.aclose(grace=options.drain_timeout)
    return ExitCode.RESULT


def _is_mcp_app(app: ServerApp) -> bool:
    from ..apps.mcp_app import McpApp

    return isinstance(app, McpApp)


@asynccontextmanager
async def _shared_state(app: ServerApp, options: ServeOptions) -> AsyncIterator[Any]:
    """``--state-keys``, ``--single-use``, ``--task-store`` and ``--task-id-prefix`` handed
    to the app, the stores open while serving; yields the DPoP proof memory the workers
    share (on ``--single-use``'s Redis, with ``--auth-dpop``) or ``None``."""
    async with AsyncExitStack() as stores:
        seen_proofs = None
        auth = options.auth
        if options.single_use is not None and auth is not None and auth.dpop is not None:
            seen_proofs = await _open_proof_memory(options.single_use, auth.audience, stores)
        keys = options.state_keys
        if keys is not None:
            from ..apps.mcp_app import McpApp

            assert isinstance(app, McpApp)  # checked by serve()
            if options.single_use is None:
                app.configure_state(keys.keys, keys.signing_key)
            else:
                single_use = await _open_single_use(options.single_use, stores)
                app.configure_state(keys.keys, keys.signing_key, single_use=single_use)
            if options.task_store is not None:
                await _use_task_store(app, options, stores)
        if options.task_store is None and options.task_id_prefix is not None:
            _prefix_task_ids(app, options.task_id_prefix)
        yield seen_proofs


async def _open_single_use(url: str, stores: AsyncExitStack) -> Any:
    from ..stores.redis import RedisSingleUse, SingleUseStoreUnavailable, redacted

    store = await stores.enter_async_context(RedisSingleUse(url))
    try:
        await store.check()
    except SingleUseStoreUnavailable as exc:  # serve anyway: redeemed legs fail closed
        _warn(f"--single-use {redacted(url)}: {exc} ({exc.__cause__})")
    return store


async def _open_proof_memory(url: str, resource: str, stores: AsyncExitStack) -> Any:
    from ..auth.proof_replay import ProofMemoryUnavailable
    from ..stores.redis import redacted
    from ..stores.redis_proofs import RedisProofMemory

    memory = await stores.enter_async_context(RedisProofMemory(url, resource=resource))
    try:
        await memory.check()
    except ProofMemoryUnavailable as exc:  # serve anyway: DPoP requests fail closed (503)
        _warn(f"--single-use {redacted(url)} (DPoP proofs): {exc} ({exc.__cause__})")
    return memory


async def _use_task_store(app: Any, options: ServeOptions, stores: AsyncExitStack) -> None:
    """The app's tasks in Redis, with the bounds of the store it had (or the defaults)."""
    from ..apps.task_store import MemoryTaskStore
    from ..stores.redis import redacted
    from ..stores.redis_tasks import RedisTaskStore, TaskStoreUnavailable

    url = options.task_store
    assert url is not None
    bounds: dict[str, Any] = {"id_prefix": options.task_id_prefix or ""}
    if options.task_lease is not None:
        bounds["lease"] = options.task_lease
    own = app.tasks
    if isinstance(own, MemoryTaskStore):
        bounds |= {
            "max_tasks": own.shares.total,
            "max_tasks_per_client": own.shares.per_client,
            "max_pending_inputs": own.max_pending_inputs,
            "max_result_bytes": own.max_result_bytes,
            "ttl": own.ttl,
            "poll_interval": own.poll_interval,
        }
    store = RedisTaskStore(url, **bounds)
    await stores.enter_async_context(store)
    try:
        await store.check()
    except TaskStoreUnavailable as exc:  # serve anyway: task requests fail closed
        _warn(f"--task-store {redacted(url)}: {exc} ({exc.__cause__})")
    app.use_task_store(store)


def _warn(message: str) -> None:
    sys.stderr.write(f"{PROG}: warning: {message}\n")
    sys.stderr.flush()


def _prefix_task_ids(app: Any, id_prefix: str) -> None:
    """``--task-id-prefix``: the app's own (memory) store names its tasks ``NAME.…``."""
    from ..apps.task_store import MemoryTaskStore

    if app.tasks is None:
        app.use_task_store(MemoryTaskStore(id_prefix=id_prefix))
    elif isinstance(app.tasks, MemoryTaskStore):
        app.tasks.id_prefix = id_prefix


def _url_of(started: Any, host: str, port: int, path: str) -> str:
    """The endpoint URL, from whatever ``serve_http`` reported when it started."""
    if isinstance(started, str):
        return started
    if isinstance(started, int):
        port = started
    elif isinstance(started, tuple) and len(started) >= 2:
        host, port = str(started[0]), int(started[1])
    elif getattr(started, "url", None):
        return str(started.url)
    elif getattr(started, "port", None):
        port = int(started.port)
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{path}"
