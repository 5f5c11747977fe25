"""Answers for ``mrtr call``: an answers book, the terminal prompts, and the handler that picks.

The model: a round of a multi round-trip call asks for input under server-chosen
keys, and each request is answered from the first source that has an answer:

1. the **answers book** (``--answers FILE``, a JSON object, plus ``--answer
   KEY=JSON`` entries and ``--root`` URIs): the entry named after the input
   request's *key* wins; otherwise the entry named after what it asks
   (``elicitation/create``, ``elicitation/create#url`` for URL mode,
   ``sampling/createMessage``, ``roots/list``);
2. ``--decline-all``: every elicitation is declined (``action: decline``);
3. the **terminal**, when stdin is one: the user answers prompts, one request at
   a time even when several arrive together;
4. otherwise nothing can answer: :class:`InputUnavailable` names the key and
   the method (the call ends, ``mrtr call`` exits 7).

Entries are the input responses of the protocol, with a few shorthands::

    {"city": {"action": "accept", "content": {"city": "Paris"}},   # by key
     "elicitation/create#url": "accept",                          # = {"action": "accept"}
     "sampling/createMessage": "a typed reply",                   # = an assistant text message
     "roots/list": ["file:///home/ada/project"]}                  # = {"roots": [{"uri": ...}]}

An accepted form answer is checked against the requested schema (types,
enums, required fields, bounds) before it is sent; an answer of the wrong kind
or shape is not sent either: the call ends with a message saying why.

Decline and cancel are different answers (the user said no; the user dismissed
the question) and both are sent to the server, which decides what follows.
An *abort* (end of input or Ctrl-C at a prompt) is neither: nothing is sent,
and the call ends with :class:`InputUnavailable`.

The client declares exactly the capabilities these sources can answer
(:meth:`CliAnswerer.capabilities`): elicitation (form, url) when an entry, the
terminal or ``--decline-all`` can answer it, sampling when an entry or the
terminal can, roots only from ``--root`` or an entry.
"""

from __future__ import annotations

import json
import math
import re
import signal
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO
from urllib.parse import urlsplit

import trio

import mrtr_core as m

from ..client.errors import InputUnavailable

#: The method names an entry of the answers book may be named after.
METHOD_ENTRIES = (
    "elicitation/create",
    "elicitation/create#url",
    "sampling/createMessage",
    "roots/list",
)
#: Capability names, by the entry that answers them.
_FORM, _URL, _SAMPLING, _ROOTS = "form", "url", "sampling", "roots"
#: Bounds on what a user may type (a pasted novel is a mistake) and how often a
#: field is asked again after an invalid answer before the prompt gives up.
MAX_LINE = 64 * 1024
MAX_ATTEMPTS = 20
#: The model name a typed sampling reply is sent under.
HUMAN_MODEL = "human (mrtr call)"


class AnswersError(ValueError):
    """The answers given on the command line or in the file are unusable (exit 2)."""


# --- Loading the book ----------------------------------------------------------------------


def parse_answer_arg(text: str) -> tuple[str, Any]:
    """``KEY=JSON`` -> ``(KEY, value)``; the key is everything before the first ``=``."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise AnswersError(f"--answer {text!r}: expected KEY=JSON")
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise AnswersError(f"--answer {key}: the value is not JSON ({exc})") from exc
    return key, value


def check_root_uri(uri: str) -> str:
    """A ``file://`` URI with an absolute path, or :class:`AnswersError`."""
    parts = urlsplit(uri)
    if parts.scheme != "file":
        raise AnswersError(f"--root {uri!r}: roots must be file:// URIs")
    if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
        raise AnswersError(f"--root {uri!r}: expected file:///absolute/path")
    if any(ord(c) < 0x20 for c in uri):
        raise AnswersError(f"--root {uri!r}: control characters are not allowed")
    return uri


class AnswerBook:
    """Answers by key or by method, from ``--answers``, ``--answer`` and ``--root``."""

    def __init__(self, entries: Mapping[str, Any] | None = None) -> None:
        self.entries: dict[str, Any] = dict(entries or {})
        for name in METHOD_ENTRIES:
            if name in self.entries:
                _response_for_entry(name, self.entries[name], _kind_of_method(name))

    @classmethod
    def load(
        cls,
        answers_file: str | None = None,
        answer_args: Sequence[str] = (),
        roots: Sequence[str] = (),
    ) -> AnswerBook:
        """The book the command line describes; :class:`AnswersError` says what is wrong."""
        entries: dict[str, Any] = {}
        if answers_file is not None:
            try:
                with open(answers_file, encoding="utf-8") as f:
                    loaded = json.load(f)
            except OSError as exc:
                raise AnswersError(f"--answers {answers_file}: {exc.strerror or exc}") from exc
            except ValueError as exc:
                raise AnswersError(f"--answers {answers_file}: not JSON ({exc})") from exc
            if not isinstance(loaded, dict):
                raise AnswersError(f"--answers {answers_file}: expected a JSON object")
            entries.update(loaded)
        for text in answer_args:
            key, value = parse_answer_arg(text)
            entries[key] = value
        if roots:
            if "roots/list" in entries:
                raise AnswersError("give roots either with --root or as a roots/list answer")
            entries["roots/list"] = {"roots": [{"uri": check_root_uri(uri)} for uri in roots]}
        return cls(entries)

    def lookup(self, key: str, request: m.InputRequest) -> tuple[str, Any] | None:
        """``(entry name, raw entry)`` for this request: its key first, then its method.

        In a 2025-era session the key *is* the method (``elicitation/create``), so
        a key that names a method is read as that method: a URL-mode request
        then finds the ``elicitation/create#url`` entry, not the form one.
        """
        if key in self.entries and key not in METHOD_ENTRIES:
            return key, self.entries[key]
        kind = m.input_kind(request)
        if kind in self.entries:
            return kind, self.entries[kind]
        return None

    def answerable(self) -> set[str]:
        """What the entries can answer: ``form``, ``url``, ``sampling``, ``roots``."""
        kinds: set[str] = set()
        for name, value in self.entries.items():
            if name in METHOD_ENTRIES:
                kinds.add(_kind_of_method(name))
            else:
                kinds.update(_kinds_of_keyed_entry(value))
        return kinds

    def response(self, name: str, key: str, request: m.InputRequest) -> m.InputResponse:
        """The typed answer for ``request`` from entry ``name``, checked against what it asks.

        Raises :class:`InputUnavailable` when the entry cannot answer this request
        (another kind of answer, or form content the schema refuses).
        """
        kind = _kind_of_request(request)
        try:
            response = _response_for_entry(name, self.entries[name], kind)
            if isinstance(request, m.ElicitFormRequest) and isinstance(response, m.ElicitResult):
                check_form_answer(request.requested_schema, response)
        except AnswersError as exc:
            raise InputUnavailable(
                f"the answer {name!r} cannot answer input request {key!r} "
                f"({m.input_kind(request)}): {exc}"
            ) from exc
        return response


def _kind_of_method(name: str) -> str:
    return {
        "elicitation/create": _FORM,
        "elicitation/create#url": _URL,
        "sampling/createMessage": _SAMPLING,
        "roots/list": _ROOTS,
    }[name]


def _kind_of_request(request: m.InputRequest) -> str:
    if isinstance(request, m.ElicitFormRequest):
        return _FORM
    if isinstance(request, m.ElicitUrlRequest):
        return _URL
    if isinstance(request, m.CreateMessageRequest):
        return _SAMPLING
    return _ROOTS


def _kinds_of_keyed_entry(value: Any) -> set[str]:
    # A key names no method, so the entry's shape says what it can answer.
    if value in ("accept", "decline", "cancel") or (isinstance(value, dict) and "action" in value):
        return {_FORM, _URL}
    if isinstance(value, str) or (isinstance(value, dict) and "model" in value):
        return {_SAMPLING}
    if isinstance(value, list) or (isinstance(value, dict) and "roots" in value):
        return {_ROOTS}
    return set()


def _response_for_entry(name: str, value: Any, kind: str) -> m.InputResponse:
    """The entry as the response type ``kind`` needs, shorthands expanded."""
    try:
        if kind in (_FORM, _URL):
            if isinstance(value, str):
                value = {"action": value}
            result = m.structure(value, m.ElicitResult)
            if result.action not in ("accept", "decline", "cancel"):
                raise AnswersError(f"unknown action {result.action!r}")
            if kind == _URL and result.content is not None:
                raise AnswersError("a URL-mode answer carries no content")
            return result
        if kind == _SAMPLING:
            if isinstance(value, str):
                value = {
                    "role": "assistant",
                    "content": {"type": "text", "text": value},
                    "model": HUMAN_MODEL,
                    "stopReason": "endTurn",
                }
            sampled = m.structure(value, m.CreateMessageResult)
            if sampled.role not in ("user", "assistant"):
                raise AnswersError(f"unknown role {sampled.role!r}")
            return sampled
        if isinstance(value, list):
            value = {"roots": [{"uri": uri} if isinstance(uri, str) else uri for uri in value]}
        roots = m.structure(value, m.ListRootsResult)
        for root in roots.roots:
            check_root_uri(root.uri)
        return roots
    except m.MrtrError as exc:
        raise AnswersError(f"entry {name!r}: {exc}") from exc
    except AnswersError as exc:
        raise AnswersError(f"entry {name!r}: {exc}") from exc


# --- Form schemas: reading and checking values --------------------------------------------


def form_fields(schema: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any], bool]]:
    """``(name, property schema, required)`` for each field, in the schema's order."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return []
    required = schema.get("required")
    needed = set(required) if isinstance(required, list) else set()
    return [
        (str(name), prop if isinstance(prop, Mapping) else {}, name in needed)
        for name, prop in properties.items()
    ]


def choices(prop: Mapping[str, Any]) -> list[tuple[Any, str]] | None:
    """``(value, label)`` options of a single- or multi-select field, or ``None``."""
    source: Mapping[str, Any] = prop
    if prop.get("type") == "array" and isinstance(prop.get("items"), Mapping):
        source = prop["items"]
    if isinstance(source.get("enum"), list):
        names = source.get("enumNames", prop.get("enumNames"))
        labels = names if isinstance(names, list) and len(names) == len(source["enum"]) else None
        return [
            (value, str(labels[i]) if labels else str(value))
            for i, value in enumerate(source["enum"])
        ]
    for keyword in ("oneOf", "anyOf"):
        options = source.get(keyword)
        if isinstance(options, list) and all(
            isinstance(o, Mapping) and "const" in o for o in options
        ):
            return [(o["const"], str(o.get("title", o["const"]))) for o in options]
    return None


_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DATE_TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:\d{2})?"
)


def check_value(prop: Mapping[str, Any], value: Any) -> str | None:
    """Why ``value`` does not fit the field's schema, or ``None`` when it does."""
    kind = prop.get("type")
    options = choices(prop)
    if kind == "array":
        if not isinstance(value, list):
            return "expected a list"
        if options is not None:
            allowed = [v for v, _ in options]
            bad = [v for v in value if v not in allowed]
            if bad:
                return f"not among the options: {', '.join(map(str, bad))}"
        low, high = prop.get("minItems"), prop.get("maxItems")
        if isinstance(low, int) and len(value) < low:
            return f"choose at least {low}"
        if isinstance(high, int) and len(value) > high:
            return f"choose at most {high}"
        return None
    if options is not None and value not in [v for v, _ in options]:
        return f"choose one of: {', '.join(label for _, label in options)}"
    if kind == "boolean":
        return None if isinstance(value, bool) else "expected true or false"
    if kind in ("number", "integer"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return "expected a number"
        if kind == "integer" and not (isinstance(value, int) or float(value).is_integer()):
            return "expected a whole number"
        if not math.isfinite(value):
            return "expected a finite number"
        low, high = prop.get("minimum"), prop.get("maximum")
        if isinstance(low, (int, float)) and value < low:
            return f"at least {low}"
        if isinstance(high, (int, float)) and value > high:
            return f"at most {high}"
        return None
    if kind == "string":
        if not isinstance(value, str):
            return "expected text"
        low, high = prop.get("minLength"), prop.get("maxLength")
        if isinstance(low, int) and len(value) < low:
            return f"at least {low} characters"
        if isinstance(high, int) and len(value) > high:
            return f"at most {high} characters"
        fmt = prop.get("format")
        if fmt == "email" and not _EMAIL.fullmatch(value):
            return "expected an email address"
        if fmt == "uri" and not urlsplit(value).scheme:
            return "expected a URI (scheme:...)"
        if fmt == "date" and not _DATE.fullmatch(value):
            return "expected a date, YYYY-MM-DD"
        if fmt == "date-time" and not _DATE_TIME.fullmatch(value):
            return "expected a date and time, YYYY-MM-DDTHH:MM[:SS][Z]"
        return None
    return None  # a type we do not know: the server judges it


def check_form_answer(schema: Mapping[str, Any], answer: m.ElicitResult) -> None:
    """An accepted form answer must fill the required fields with values that fit."""
    if answer.action != "accept":
        if answer.content is not None:
            raise AnswersError(f"a {answer.action} answer carries no content")
        return
    content = answer.content or {}
    for name, prop, required in form_fields(schema):
        if name not in content:
            if required:
                raise AnswersError(f"the required field {name!r} is missing")
            continue
        problem = check_value(prop, content[name])
        if problem is not None:
            raise AnswersError(f"field {name!r}: {problem}")


def parse_field(prop: Mapping[str, Any], text: str) -> Any:
    """What the user typed for a field, as its JSON value; ``ValueError`` says why not."""
    kind = prop.get("type")
    options = choices(prop)
    text = text.strip()
    if kind == "array":
        picks = [part.strip() for part in text.split(",") if part.strip()]
        return [_pick(options, part) if options else part for part in picks]
    if options is not None:
        return _pick(options, text)
    if kind == "boolean":
        lowered = text.lower()
        if lowered in ("y", "yes", "true", "1"):
            return True
        if lowered in ("n", "no", "false", "0"):
            return False
        raise ValueError("answer y or n")
    if kind == "integer":
        try:
            return int(text)
        except ValueError:
            raise ValueError("expected a whole number") from None
    if kind == "number":
        try:
            number = float(text)
        except ValueError:
            raise ValueError("expected a number") from None
        return (
            int(number) if number.is_integer() and "." not in text and "e" not in text else number
        )
    return text


def _pick(options: list[tuple[Any, str]] | None, text: str) -> Any:
    assert options is not None
    if text.isdigit() and 1 <= int(text) <= len(options):
        return options[int(text) - 1][0]
    for value, label in options:
        if text in (str(value), label):
            return value
    raise ValueError(f"choose a number from 1 to {len(options)}")


# --- The terminal -------------------------------------------------------------------------


class PromptAborted(Exception):
    """The user ended input (EOF) or pressed Ctrl-C at a prompt."""


class Terminal:
    """Line prompts on a terminal: ``say`` writes, ``ask`` reads one line.

    Reads happen in a worker thread (a blocking ``readline`` on the terminal,
    abandoned if the call is cancelled), so the rest of the call (other legs,
    timers) keeps running while the user types.  End of input, or Ctrl-C while
    a prompt waits (when ``catch_interrupt`` is true, which needs the main
    thread), raise :class:`PromptAborted`.
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
        self.outfile.write(text + "\n")
        self.outfile.flush()

    async def ask(self, prompt: str) -> str:
        self.outfile.write(prompt)
        self.outfile.flush()
        line: str | None = None
        interrupted = False

        async def read(cancel: trio.CancelScope) -> None:
            nonlocal line
            line = await trio.to_thread.run_sync(
                self.infile.readline, MAX_LINE + 1, abandon_on_cancel=True
            )
            cancel.cancel()

        async def watch(cancel: trio.CancelScope, signals: Any) -> None:
            nonlocal interrupted
            async for _ in signals:
                interrupted = True
                cancel.cancel()
                return

        if self.catch_interrupt:
            with trio.open_signal_receiver(signal.SIGINT) as signals:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(read, nursery.cancel_scope)
                    nursery.start_soon(watch, nursery.cancel_scope, signals)
        else:
            with trio.CancelScope() as scope:
                await read(scope)
        if interrupted:
            self.say()
            raise PromptAborted("interrupted at the prompt")
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
    return f"{title} ({', '.join(notes)})"


async def prompt_form(terminal: Terminal, request: m.ElicitFormRequest) -> m.ElicitResult:
    """Ask for a form: accept (then each field), decline, or cancel."""
    terminal.say()
    terminal.say(f"The server asks: {request.message}")
    fields = form_fields(request.requested_schema)
    if fields:
        terminal.say("Fields: " + ", ".join(name for name, _, _ in fields))
    choice = await terminal.ask_choice(
        "Answer it? [a]ccept / [d]ecline / [c]ancel: ",
        {"a": "accept", "d": "decline", "c": "cancel"},
    )
    if choice != "accept":
        return m.ElicitResult(action=choice)  # type: ignore[arg-type]
    content: dict[str, Any] = {}
    for name, prop, required in fields:
        value = await _ask_field(terminal, name, prop, required)
        if value is not _OMIT:
            content[name] = value
    return m.ElicitResult(action="accept", content=content)


_OMIT = object()


async def _ask_field(terminal: Terminal, name: str, prop: Mapping[str, Any], required: bool) -> Any:
    if prop.get("description"):
        terminal.say(f"  {prop['description']}")
    options = choices(prop)
    if options is not None:
        for i, (value, label) in enumerate(options, 1):
            shown = label if label == str(value) else f"{label} ({value})"
            terminal.say(f"    {i}) {shown}")
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
            terminal.say(f"  {exc}")
            continue
        problem = check_value(prop, value)
        if problem is None:
            return value
        terminal.say(f"  {problem}")
    raise PromptAborted(f"no valid value for {name!r} after many attempts")


async def prompt_url(terminal: Terminal, request: m.ElicitUrlRequest) -> m.ElicitResult:
    """Show the full URL first, then ask consent, then wait until the user is done."""
    parts = urlsplit(request.url)
    terminal.say()
    terminal.say(f"The server asks you to visit a URL: {request.message}")
    terminal.say(f"  URL:  {request.url}")
    terminal.say(f"  host: {parts.hostname or '(none)'}  scheme: {parts.scheme or '(none)'}")
    choice = await terminal.ask_choice(
        "Open it? [y]es / [d]ecline / [c]ancel: ", {"y": "yes", "d": "decline", "c": "cancel"}
    )
    if choice != "yes":
        return m.ElicitResult(action=choice)  # type: ignore[arg-type]
    terminal.say("Open the URL above in your browser and finish there.")
    done = await terminal.ask_choice(
        "Done? [Enter or d]one / [c]ancel: ", {"": "done", "d": "done", "c": "cancel"}
    )
    return m.ElicitResult(action="accept" if done == "done" else "cancel")


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
    terminal: Terminal, request: m.CreateMessageRequest
) -> m.CreateMessageResult:
    """Show the conversation; the user types the model's reply (or ``/refuse``)."""
    terminal.say()
    terminal.say(f"The server asks for a model reply (at most {request.max_tokens} tokens).")
    if request.system_prompt:
        terminal.say(f"  system: {request.system_prompt}")
    for message in request.messages:
        terminal.say(f"  {message.get('role', '?')}: {_text_of(message.get('content'))}")
    for _ in range(MAX_ATTEMPTS):
        reply = await terminal.ask("Reply (one line; /refuse to refuse): ")
        if reply.strip() == "/refuse":
            raise InputUnavailable("the user refused the sampling request")
        if reply.strip():
            return m.CreateMessageResult(
                role="assistant",
                content={"type": "text", "text": reply},
                model=HUMAN_MODEL,
                stop_reason="endTurn",
            )
        terminal.say("  type a reply, or /refuse")
    raise PromptAborted("no reply after many attempts")


# --- The handler --------------------------------------------------------------------------


class CliAnswerer:
    """The ``InputHandler`` of ``mrtr call``: book, then ``--decline-all``, then terminal."""

    def __init__(
        self,
        book: AnswerBook | None = None,
        *,
        terminal: Terminal | None = None,
        decline_all: bool = False,
    ) -> None:
        self.book = book or AnswerBook()
        self.terminal = terminal
        self.decline_all = decline_all
        # One prompt at a time: requests of one round (or of parallel calls) queue here.
        self._prompt_lock = trio.Lock()

    def capabilities(self) -> dict[str, Any]:
        """Exactly the client capabilities these sources can answer."""
        kinds = self.book.answerable()
        if self.terminal is not None:
            kinds |= {_FORM, _URL, _SAMPLING}
        if self.decline_all:
            kinds |= {_FORM, _URL}
        caps: dict[str, Any] = {}
        elicitation: dict[str, Any] = {mode: {} for mode in (_FORM, _URL) if mode in kinds}
        if elicitation:
            caps["elicitation"] = elicitation
        if _SAMPLING in kinds:
            caps["sampling"] = {}
        if _ROOTS in kinds:
            caps["roots"] = {}
        return caps

    async def __call__(self, key: str, request: m.InputRequest) -> m.InputResponse:
        found = self.book.lookup(key, request)
        if found is not None:
            return self.book.response(found[0], key, request)
        elicitation = isinstance(request, (m.ElicitFormRequest, m.ElicitUrlRequest))
        if self.decline_all and elicitation:
            return m.ElicitResult(action="decline")
        if self.terminal is not None and not isinstance(request, m.ListRootsRequest):
            async with self._prompt_lock:
                try:
                    return await self._prompt(request)
                except PromptAborted as exc:
                    raise InputUnavailable(
                        f"input request {key!r} ({m.input_kind(request)}): {exc}"
                    ) from exc
        raise InputUnavailable(no_answer_message(key, request, self.terminal is not None))

    async def _prompt(self, request: m.InputRequest) -> m.InputResponse:
        assert self.terminal is not None
        if isinstance(request, m.ElicitFormRequest):
            return await prompt_form(self.terminal, request)
        if isinstance(request, m.ElicitUrlRequest):
            return await prompt_url(self.terminal, request)
        assert isinstance(request, m.CreateMessageRequest)
        return await prompt_sampling(self.terminal, request)


def no_answer_message(key: str, request: m.InputRequest, terminal: bool) -> str:
    """What to say when nothing can answer ``key``: the key, the method, how to answer."""
    kind = m.input_kind(request)
    if isinstance(request, m.ListRootsRequest):
        how = "pass --root file:///... (or a roots/list answer)"
    else:
        how = f'add "{key}" or "{kind}" to --answers FILE, or pass --answer {key}=JSON'
    where = "" if terminal else " and stdin is not a terminal"
    return f"no answer for input request {key!r} ({kind}){where}: {how}"
