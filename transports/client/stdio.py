"""The stdio client: an MCP server run as a child process, one JSON message per line.

The model: :class:`StdioLink` spawns the server command in its own process
group (``start_new_session``) with three pipes, and runs three tasks.  The
stdout reader feeds every chunk to the client's ``Connection(framing="lines")``;
the stdin writer drains a bounded queue of outgoing messages (so the
client's pump never blocks on a full pipe); the stderr reader splits lines,
forwards each to the ``logging`` logger ``mrtr.stdio`` (stderr is the
server's log, never an error) and keeps the last ``stderr_lines`` of them.

When stdout ends the child is gone (or going): the link waits briefly for its
exit status and the rest of its stderr, then reports a
:class:`~mrtr_transports.client.errors.TransportError` carrying both, which every
call still in flight raises.  A command that cannot be started raises the
same error (``kind="spawn"``) from :func:`open_stdio_client`.

Shutdown, as the specification says: close the child's stdin, wait
``close_timeout``; SIGTERM to the process group, wait ``terminate_timeout``;
then SIGKILL to the group.

Bounds: ``max_queued`` messages waiting for the child to read them (past that
the child is taken as stuck: ``TransportError``); ``stderr_lines`` lines of
stderr kept, each cut at ``MAX_STDERR_LINE`` bytes; stdout is read 64 KiB at a
time and the connection's framer bounds a line at its ``max_message_size``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal, Unpack

import anyio
from anyio.abc import Process, TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream

import mrtr_core as m

from .._loop import LoopTools
from .client import Client
from .errors import TransportError
from .link import ClientOptions, LinkClient, Outbound
from .opening import open_client
from .pipes import PipeEnd

stderr_logger = logging.getLogger("mrtr.client.stdio")

#: Bytes of one stderr line kept (longer lines are cut into pieces).
MAX_STDERR_LINE = 8192
READ_SIZE = 65536


def _exit_text(status: int | None) -> str:
    if status is None:
        return "closed its stdout but is still running"
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        return f"was killed by {name}"
    return f"exited with status {status}"


class StdioLink:
    """A server child process as the client's link (see the module docstring)."""

    framing: Literal["lines", "messages"] = "lines"
    needs_messages = False
    wants_tool_list = False
    confirms_transmission = False  # one ordered queue to the child: handed over is sent
    cancellation: Literal["notify", "close_stream"] = "notify"
    respawns = True  # restart() starts a new child (after one died of the era probe)

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        stderr_lines: int = 50,
        close_timeout: float = 2.0,
        terminate_timeout: float = 2.0,
        exit_wait: float = 2.0,
        max_queued: int = 4096,
    ) -> None:
        if isinstance(argv, (str, bytes)) or not argv:
            raise ValueError("argv must be a non-empty sequence of strings (the command and args)")
        self.argv = [str(arg) for arg in argv]
        self._env = None if env is None else {**os.environ, **env}
        self._cwd = cwd
        self.close_timeout = close_timeout
        self.terminate_timeout = terminate_timeout
        self.exit_wait = exit_wait
        #: The child, once started.
        self.process: Process | None = None
        self._stdin: PipeEnd | None = None  # our end of the child's stdin
        #: The signals shutdown had to send, in order (``"SIGTERM"``, ``"SIGKILL"``).
        self.signals_sent: list[str] = []
        self._stderr_tail: deque[str] = deque(maxlen=stderr_lines)
        self._stderr_done = anyio.Event()
        self._outgoing, self._queued = anyio.create_memory_object_stream[bytes](max_queued)
        self._max_queued = max_queued
        # Messages queued for the writer task and not yet written to the end.  While it is
        # 0 a message goes to the child's stdin at once (``os.write``, no task hop); what
        # the pipe does not take is queued, so the order holds.
        self._in_queue = 0
        self._input_done = False  # stdin closed (or the child stopped reading it)
        self._client: LinkClient | None = None
        self._stdout_ended = False
        #: How many times the child was started (a restart after it died of the probe).
        self.spawns = 0

    @property
    def stderr_tail(self) -> list[str]:
        """The last lines the child wrote to stderr."""
        return list(self._stderr_tail)

    async def restart(self, client: LinkClient, task_group: TaskGroup) -> None:
        """A new client connection: when the child is gone (its stdout ended), start a new
        one; a live child keeps serving (line framing starts afresh on a new connection)."""
        if not self._stdout_ended:
            return
        old = self.process
        if old is not None and old.returncode is None:
            self._signal(signal.SIGKILL)  # (stdout closed, still running: not a server)
            await old.wait()
        self._stderr_tail.clear()
        self._stderr_done = anyio.Event()
        self._outgoing, self._queued = anyio.create_memory_object_stream[bytes](self._max_queued)
        self._in_queue = 0
        self._input_done = False
        self._stdout_ended = False
        await self.start(client, task_group)

    async def start(self, client: LinkClient, task_group: TaskGroup) -> None:
        self._client = client
        self.spawns += 1
        # Our own pipes for stdin and stdout (see transports/client/pipes.py); stderr is
        # the loop's stream (a log, read line by line).
        child_stdin, stdin = os.pipe()
        stdout, child_stdout = os.pipe()
        try:
            self.process = await anyio.open_process(
                self.argv,
                stdin=child_stdin,
                stdout=child_stdout,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its own process group: signals reach its children
                env=self._env,
                cwd=self._cwd,
            )
        except BaseException as exc:
            os.close(stdin)
            os.close(stdout)
            if not isinstance(exc, OSError):
                raise
            reason = exc.strerror or str(exc)
            raise TransportError(
                f"could not start the server {self.argv[0]!r}: {reason}", [], kind="spawn"
            ) from exc
        finally:
            os.close(child_stdin)  # (the child has its own copies)
            os.close(child_stdout)
        self._stdin = PipeEnd(stdin)
        task_group.start_soon(self._read_stderr, self.process, self._stderr_done)
        task_group.start_soon(self._write_stdin, self._stdin, self._queued)
        loop = LoopTools()
        task_group.start_soon(self._read_stdout, self.process, PipeEnd(stdout, loop), loop)

    def transmit(self, out: Outbound) -> None:
        data = out.data
        if self._input_done:
            return  # shutting down, or the child stopped reading (its exit is reported)
        stdin = self._stdin
        if self._in_queue == 0 and stdin is not None:
            try:
                written = stdin.write_now(data)
            except (OSError, anyio.ClosedResourceError):
                self._input_done = True  # the stdout reader reports how the child ended
                return
            if written == len(data):
                return
            data = data[written:]
        try:
            self._outgoing.send_nowait(data)
        except anyio.WouldBlock:
            assert self._client is not None
            self._client.link_lost(
                TransportError(
                    f"the server is not reading its input ({self._max_queued} messages waiting)",
                    self.stderr_tail,
                    kind="disconnect",
                )
            )
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # shutting down
        else:
            self._in_queue += 1

    def close_stream(self, request_id: m.RequestId) -> None:
        """Nothing to close on a shared stream: the cancellation went out as a message."""

    def tools_listed(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return tools  # stdio has no headers: x-mcp-header annotations may be ignored

    async def aclose(self) -> None:
        process = self.process
        self._input_done = True  # nothing more is written directly ...
        self._outgoing.close()  # ... the writer sends what is queued, then closes stdin
        if process is None:
            return
        with anyio.move_on_after(self.close_timeout):
            await process.wait()  # (the writer closes its stdin once the queue is out)
        if process.returncode is None:
            self._signal(signal.SIGTERM)
            with anyio.move_on_after(self.terminate_timeout):
                await process.wait()
        if process.returncode is None:
            self._signal(signal.SIGKILL)
            await process.wait()  # SIGKILL cannot be refused

    def _signal(self, sig: signal.Signals) -> None:
        assert self.process is not None
        self.signals_sent.append(sig.name)
        with contextlib.suppress(ProcessLookupError):  # it exited just now
            os.killpg(self.process.pid, sig)

    async def _write_stdin(self, stdin: PipeEnd, queued: MemoryObjectReceiveStream[bytes]) -> None:
        # (``stdin is self._stdin``: still the current child's, not one gone before a restart)
        try:
            async with queued:
                async for data in queued:
                    await stdin.send_all(data)
                    if stdin is self._stdin:
                        self._in_queue -= 1
        except (anyio.ClosedResourceError, OSError):
            if stdin is self._stdin:
                self._input_done = True  # the child stopped reading: the stdout reader says how
        finally:
            stdin.close()

    async def _read_stdout(self, process: Process, stdout: PipeEnd, loop: LoopTools) -> None:
        assert self._client is not None
        try:
            await self._read_pipe(stdout, loop.checkpoint)
        except (anyio.ClosedResourceError, OSError):
            pass
        finally:
            stdout.close()
        self._stdout_ended = True
        # The child closed stdout: it is exiting (or misbehaving). Report how it ended.
        with anyio.move_on_after(self.exit_wait):
            await process.wait()
            await self._stderr_done.wait()
        status = process.returncode
        self._client.link_lost(
            TransportError(
                f"the server {self.argv[0]!r} {_exit_text(status)}",
                self.stderr_tail,
                kind="disconnect",
                exit_status=status,
            )
        )

    async def _read_pipe(self, stdout: PipeEnd, checkpoint: Callable[[], Awaitable[None]]) -> None:
        """Read the child's stdout to its end, directly: a stream's ``receive`` yields
        to the scheduler before every read, a pass of the run loop per message.  Here a
        read yields by waiting for the pipe, or by one checkpoint when it found bytes
        without waiting twice in a row, so a flood from the child still lets callers run."""
        assert self._client is not None
        waited = True
        while True:
            data = stdout.read_now(READ_SIZE)
            if data is None:
                waited = True
                await stdout.wait_readable()
                continue
            if not waited:  # bytes twice in a row without waiting: let the others run first
                await checkpoint()
            waited = False
            if not data:
                return
            self._client.receive_data(data)

    async def _read_stderr(self, process: Process, done: anyio.Event) -> None:
        assert process.stderr is not None
        stderr = process.stderr
        pending = bytearray()
        try:
            while True:
                pending += await stderr.receive(READ_SIZE)
                while (end := pending.find(b"\n")) >= 0:
                    self._stderr_line(bytes(pending[:end]))
                    del pending[: end + 1]
                while len(pending) > MAX_STDERR_LINE:
                    self._stderr_line(bytes(pending[:MAX_STDERR_LINE]))
                    del pending[:MAX_STDERR_LINE]
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        finally:
            if pending:
                self._stderr_line(bytes(pending))
            done.set()
            with anyio.CancelScope(shield=True):
                await stderr.aclose()

    def _stderr_line(self, raw: bytes) -> None:
        line = raw.decode("utf-8", "replace").rstrip("\r")
        self._stderr_tail.append(line)
        stderr_logger.info("%s: %s", self.argv[0], line)


@asynccontextmanager
async def open_stdio_client(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stderr_lines: int = 50,
    close_timeout: float = 2.0,
    terminate_timeout: float = 2.0,
    **client_options: Unpack[ClientOptions],
) -> AsyncIterator[Client]:
    """Spawn ``argv`` and yield a :class:`~mrtr_transports.client.client.Client` whose session
    is open.  ``env`` is added to the inherited environment; ``client.link`` is
    the :class:`StdioLink` (its ``process``, ``stderr_tail``, ``signals_sent``).
    Other options go to the ``Client`` (:class:`~mrtr_transports.client.client.ClientOptions`:
    ``answer``, ``capabilities``, ``era``, ``info``, ``tracer``, ``log_level``, ...).
    """
    link = StdioLink(
        argv,
        env=env,
        cwd=cwd,
        stderr_lines=stderr_lines,
        close_timeout=close_timeout,
        terminate_timeout=terminate_timeout,
    )
    async with open_client(link, **client_options) as client:
        yield client
