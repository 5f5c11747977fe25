"""The terminal side of ``mrtr call``: line prompts for forms, URLs and sampling.

:class:`Terminal` reads one line at a time in a worker thread (the rest of
the call keeps running while the user types); end of input at a prompt is
:class:`PromptAborted`, never an answer, and Ctrl-C stops the whole command
(``KeyboardInterrupt``: ``mrtr call`` exits 130).  Forms are asked field by
field from the requested schema (types, enums, defaults, required fields; an
invalid value is asked again, at most :data:`MAX_ATTEMPTS` times).  URL mode
shows the full URL first, then asks for consent; consent is the answer, and the
call then waits for the server (its polls are paced while the user is in the
browser, never counted as server time).  Sampling shows the conversation and the
user types the reply.  Roots are asked one per line, a ``file://`` URI or a path
(made absolute, then a ``file://`` URI), until an empty line.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

import anyio

import mrtr_core as m

from ..client.errors import InputUnavailable
from . import url_consent
from .forms import check_value, choices, form_fields, parse_field
from .terminal_text import one_line, shown

__all__ = [
    "HUMAN_MODEL",
    "MAX_ATTEMPTS",
    "MAX_LINE",
    "MAX_ROOTS",
    "WAITING_FOR_SERVER",
    "PromptAborted",
    "Terminal",
    "prompt_form",
    "prompt_roots",
    "prompt_sampling",
    "prompt_url",
    "root_problem",
    "root_uri_of",
    "show_url_request",
]

#: Bounds on what a user may type (a pasted novel is a mistake) and how often a
#: field is asked again after an invalid answer before the prompt gives up.
MAX_LINE = 64 * 1024
MAX_ATTEMPTS = 20
#: Most roots one answer typed at the terminal carries.
MAX_ROOTS = 100
#: The model name a typed sampling reply is sent under.
HUMAN_MODEL = "human (mrtr call)"
#: Said once the user consented to open a URL: the call now waits for the server.
WAITING_FOR_SERVER = "Waiting for the server to hear back from your browser (Ctrl-C stops)..."


class PromptAborted(Exception):
    """The user ended input (EOF) at a prompt, or typed a line past ``MAX_LINE``."""


class Terminal:
    """Line prompts on a terminal: ``say`` writes, ``ask`` reads one line.

    Reads happen in a worker thread (a blocking ``readline`` on the terminal,
    abandoned if the call is cancelled), so the rest of the call (other legs,
    timers) keeps running while the user types.  End of input raises
    :class:`PromptAborted`.  Ctrl-C while a prompt waits (caught when
    ``catch_interrupt`` is true, which needs the main thread) ends the prompt's
    line and raises ``KeyboardInterrupt``: the person wants the command
    stopped, not the question answered or declined.
    """

    def __init__(self, infile: TextIO, outfile: TextIO, *, catch_interrupt: bool = True) -> None:
        self.infile = infile
        self.outfile = outfile
        self.catch_interrupt = catch_interrupt

    @classmethod
    def from_stdio(cls) -> Terminal | None:
        """A terminal on stdin (prompts on stderr), or ``None`` when stdin is not a tty."""
        try:
            interactive = sys.stdin.isatty()
        except (AttributeError, ValueError):
            interactive = False
        return cls(sys.stdin, sys.stderr) if interactive else None

    def say(self, text: str = "") -> None:
        # (what the server sent is made safe where it is composed; this is the backstop)
        self.outfile.write(shown(text) + "\n")
        self.outfile.flush()

    def _show_prompt(self, text: str) -> None:
        """Write ``text`` with no newline (a prompt the answer is typed after)."""
        self.outfile.write(shown(text).replace("\n", " "))
        self.outfile.flush()

    async def ask(self, prompt: str) -> str:
        line: str | None = None
        interrupted = False

        async def read(cancel: anyio.CancelScope) -> None:
            nonlocal line
            line = await anyio.to_thread.run_sync(
                self.infile.readline, MAX_LINE + 1, abandon_on_cancel=True
            )
            cancel.cancel()

        async def watch(cancel: anyio.CancelScope, signals: Any) -> None:
            nonlocal interrupted
            async for _ in signals:
                interrupted = True
                cancel.cancel()
                return

        if self.catch_interrupt:
            with anyio.open_signal_receiver(signal.SIGINT) as signals:
                self._show_prompt(prompt)  # once Ctrl-C is ours: the line gets ended
                async with anyio.create_task_group() as nursery:
                    nursery.start_soon(read, nursery.cancel_scope)
                    nursery.start_soon(watch, nursery.cancel_scope, signals)
        else:
            self._show_prompt(prompt)
            with anyio.CancelScope() as scope:
                await read(scope)
        if interrupted:
            self.say()
            raise KeyboardInterrupt
        if not line:
            self.say()
            raise PromptAborted("end of input at the prompt")
        if len(line) > MAX_LINE:
            raise PromptAborted(f"a line longer than {MAX_LINE} characters")
        return line.rstrip("\r\n")

    async def ask_choice(self, prompt: str, options: Mapping[str, str]) -> str:
        """Ask until the answer is one of ``options`` (letters or words, any case)."""
        for _ in range(MAX_ATTEMPTS):
            text = (await self.ask(prompt)).strip().lower()
            for letter, word in options.items():
                if text in (letter, word):
                    return word
            self.say(f"  please answer {' / '.join(options)}")
        raise PromptAborted("no valid choice after many attempts")


# --- The prompts --------------------------------------------------------------------------


def _describe(name: str, prop: Mapping[str, Any], required: bool) -> str:
    kind = prop.get("type", "value")
    if kind == "array":
        kind = "list, comma separated"
    notes = [str(kind), "required" if required else "optional"]
    if "default" in prop:
        notes.append(f"default {json.dumps(prop['default'], ensure_ascii=False)}")
    for key, word in (("minimum", "min"), ("maximum", "max")):
        if key in prop:
            notes.append(f"{word} {prop[key]}")
    if prop.get("format"):
        notes.append(str(prop["format"]))
    title = prop.get("title") or name
    return one_line(f"{title} ({', '.join(notes)})")


async def prompt_form(terminal: Terminal, request: m.wire.ElicitFormRequest) -> m.wire.ElicitResult:
    """Ask for a form: accept (then each field), decline, or cancel."""
    terminal.say()
    terminal.say(f"The server asks: {shown(request.message)}")
    fields = form_fields(request.requested_schema)
    if fields:
        terminal.say(one_line("Fields: " + ", ".join(name for name, _, _ in fields)))
    choice = await terminal.ask_choice(
        "Answer it? [a]ccept / [d]ecline / [c]ancel: ",
        {"a": "accept", "d": "decline", "c": "cancel"},
    )
    if choice != "accept":
        return m.wire.ElicitResult(action=choice)  # type: ignore[arg-type]
    content: dict[str, Any] = {}
    for name, prop, required in fields:
        value = await _ask_field(terminal, name, prop, required)
        if value is not _OMIT:
            content[name] = value
    return m.wire.ElicitResult(action="accept", content=content)


_OMIT = object()


async def _ask_field(terminal: Terminal, name: str, prop: Mapping[str, Any], required: bool) -> Any:
    if prop.get("description"):
        terminal.say(f"  {one_line(str(prop['description']))}")
    options = choices(prop)
    if options is not None:
        for i, (value, label) in enumerate(options, 1):
            text = label if label == str(value) else f"{label} ({value})"
            terminal.say(f"    {i}) {one_line(text)}")
    for _ in range(MAX_ATTEMPTS):
        text = await terminal.ask(f"  {_describe(name, prop, required)}: ")
        if not text.strip():
            if "default" in prop:
                return prop["default"]
            if not required:
                return _OMIT
            terminal.say("  this field is required")
            continue
        try:
            value = parse_field(prop, text)
        except ValueError as exc:
            terminal.say(f"  {one_line(str(exc))}")
            continue
        problem = check_value(prop, value)
        if problem is None:
            return value
        terminal.say(f"  {one_line(problem)}")
    raise PromptAborted(f"no valid value for {name!r} after many attempts")


def show_url_request(say: Callable[[str], None], request: m.wire.ElicitUrlRequest) -> bool:
    """Show a URL elicitation (:mod:`~mrtr_transports.cli.url_consent`): the message,
    then the URL whole and plain on its own line (after ``URL:``), its host and scheme
    (``(not https)`` when so); ``False`` (said why) when the URL may not be offered."""
    say("")
    # (one line: a message of several could draw a "URL:" line of its own above the real one)
    say(f"The server asks you to visit a URL: {one_line(request.message)}")
    refused = url_consent.refusal(request.url)
    if refused is not None:
        say(f"Declined: mrtr will not offer this URL: {refused}.")
        say(f"  (it was: {one_line(request.url)})")
        return False
    parts = urlsplit(request.url)
    marked = url_consent.warning(request.url)
    say(f"  URL:  {request.url}")
    say(f"  host: {parts.hostname}  scheme: {parts.scheme}" + (f"  ({marked})" if marked else ""))
    return True


async def prompt_url(terminal: Terminal, request: m.wire.ElicitUrlRequest) -> m.wire.ElicitResult:
    """Show the full URL first, then ask consent; consent is the answer (``accept``), and
    the call then waits for the server to hear that the user is done.  A refused URL
    is declined without asking."""
    if not show_url_request(terminal.say, request):
        return m.wire.ElicitResult(action="decline")
    choice = await terminal.ask_choice(
        "Open it? [y]es / [d]ecline / [c]ancel: ", {"y": "yes", "d": "decline", "c": "cancel"}
    )
    if choice != "yes":
        return m.wire.ElicitResult(action=choice)  # type: ignore[arg-type]
    # Accept is consent (2026-07-28), not "finished": the server learns that from its
    # own state (its callback), and the client polls it, paced, until it has.
    terminal.say("Open the URL above in your browser and finish there.")
    terminal.say(WAITING_FOR_SERVER)
    return m.wire.ElicitResult(action="accept")


def _text_of(content: Any) -> str:
    items = content if isinstance(content, list) else [content]
    parts = []
    for item in items:
        if isinstance(item, Mapping) and item.get("type") == "text":
            parts.append(str(item.get("text", "")))
        elif isinstance(item, Mapping):
            parts.append(f"[{item.get('type', 'content')}]")
    return " ".join(parts)


async def prompt_sampling(
    terminal: Terminal, request: m.wire.CreateMessageRequest
) -> m.wire.CreateMessageResult:
    """Show the conversation; the user types the model's reply (or ``/refuse``)."""
    terminal.say()
    terminal.say(f"The server asks for a model reply (at most {request.max_tokens} tokens).")
    if request.system_prompt:
        terminal.say(f"  system: {shown(request.system_prompt)}")
    for message in request.messages:
        role = one_line(str(message.get("role", "?")), 40)
        terminal.say(f"  {role}: {shown(_text_of(message.get('content')))}")
    for _ in range(MAX_ATTEMPTS):
        reply = await terminal.ask("Reply (one line; /refuse to refuse): ")
        if reply.strip() == "/refuse":
            raise InputUnavailable("the user refused the sampling request")
        if reply.strip():
            return m.wire.CreateMessageResult(
                role="assistant",
                content={"type": "text", "text": reply},
                model=HUMAN_MODEL,
                stop_reason="endTurn",
            )
        terminal.say("  type a reply, or /refuse")
    raise PromptAborted("no reply after many attempts")


# --- Roots --------------------------------------------------------------------------------


def root_problem(uri: str) -> str | None:
    """Why ``uri`` is no root (a ``file://`` URI of an absolute path), or ``None``."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in uri):
        return "control characters are not allowed"
    parts = urlsplit(uri)
    if parts.scheme != "file":
        return "roots must be file:// URIs"
    if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
        return "expected file:///absolute/path"
    return None


def root_uri_of(text: str) -> str:
    """What a person typed as a root: a ``file:`` URI as it is, a path (``~`` and
    relative ones too) as the ``file://`` URI of its absolute form."""
    if text.lower().startswith("file:"):
        return text
    if "://" in text:
        return text  # another scheme: root_problem says why not
    return Path(os.path.expanduser(text)).absolute().as_uri()


async def prompt_roots(
    terminal: Terminal, request: m.wire.ListRootsRequest
) -> m.wire.ListRootsResult:
    """Ask for roots one per line (a path or a ``file://`` URI) until an empty line."""
    terminal.say()
    terminal.say("The server asks for your roots: the folders it may work in.")
    terminal.say("  One per line, a path or a file:// URI; an empty line ends the list.")
    roots: list[m.wire.Root] = []
    attempts = 0
    while len(roots) < MAX_ROOTS:
        text = (await terminal.ask(f"  root {len(roots) + 1}: ")).strip()
        if not text:
            break
        uri = root_uri_of(text)
        problem = root_problem(uri)
        if problem is not None:
            attempts += 1
            if attempts >= MAX_ATTEMPTS:
                raise PromptAborted("no valid root after many attempts")
            terminal.say(f"  {problem}")
            continue
        if uri != text:
            terminal.say(f"  = {uri}")
        roots.append(m.wire.Root(uri=uri))
    return m.wire.ListRootsResult(roots=roots)
