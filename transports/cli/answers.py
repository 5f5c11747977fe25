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
   a time even when several arrive together, in the order the server listed
   them (roots too: typed as paths or ``file://`` URIs);
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
An *abort* (end of input at a prompt) is neither: nothing is sent, and the
call ends with :class:`InputUnavailable`.  Ctrl-C at a prompt sends nothing
either: it stops the command (``KeyboardInterrupt``, exit 130).

The client declares exactly the capabilities these sources can answer
(:meth:`CliAnswerer.capabilities`): elicitation (form, url) when an entry, the
terminal or ``--decline-all`` can answer it, sampling and roots when an entry
(or ``--root``) or the terminal can.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO, cast

import anyio

import mrtr_core as m

from ..client.errors import InputUnavailable
from ..client.inputs import KIND_NAMES, capability_of, response_type_for
from .forms import FormAnswerError, check_form_answer, check_value
from .prompts import (
    HUMAN_MODEL,
    WAITING_FOR_SERVER,
    PromptAborted,
    Terminal,
    prompt_form,
    prompt_roots,
    prompt_sampling,
    prompt_url,
    root_problem,
    show_url_request,
)
from .terminal_text import shown

__all__ = [
    "METHOD_ENTRIES",
    "AnswerBook",
    "AnswersError",
    "CliAnswerer",
    "Terminal",
    "check_root_uri",
    "check_value",
    "no_answer_message",
    "parse_answer_arg",
]

#: The kind names an entry of the answers book may be named after (the core's kinds).
METHOD_ENTRIES = KIND_NAMES
_URL_ENTRY = "elicitation/create#url"
ACCEPTED = m.wire.ElicitResult(action="accept")
#: Capability names, by the entry that answers them.
_FORM, _URL, _SAMPLING, _ROOTS = "form", "url", "sampling", "roots"


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
    problem = root_problem(uri)
    if problem is not None:
        raise AnswersError(f"--root {uri!r}: {problem}")
    return uri


class AnswerBook:
    """Answers by key or by method, from ``--answers``, ``--answer`` and ``--root``."""

    def __init__(self, entries: Mapping[str, Any] | None = None) -> None:
        self.entries: dict[str, Any] = dict(entries or {})
        for name in METHOD_ENTRIES:
            if name in self.entries:
                _response_for_entry(name, self.entries[name], name)

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

    def lookup(self, key: str, request: m.wire.InputRequest) -> tuple[str, Any] | None:
        """``(entry name, raw entry)`` for this request: its key first, then its method.

        In a 2025-era session the key *is* the method (``elicitation/create``), so
        a key that names a method is read as that method: a URL-mode request
        then finds the ``elicitation/create#url`` entry, not the form one.
        """
        if key in self.entries and key not in METHOD_ENTRIES:
            return key, self.entries[key]
        kind = m.engine._events.input_kind(request)
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

    def response(self, name: str, key: str, request: m.wire.InputRequest) -> m.wire.InputResponse:
        """The typed answer for ``request`` from entry ``name``, checked against what it asks.

        Raises :class:`InputUnavailable` when the entry cannot answer this request
        (another kind of answer, or form content the schema refuses).
        """
        try:
            response = _response_for_entry(
                name, self.entries[name], m.engine._events.input_kind(request)
            )
            if isinstance(request, m.wire.ElicitFormRequest) and isinstance(
                response, m.wire.ElicitResult
            ):
                check_form_answer(request.requested_schema, response)
        except (AnswersError, FormAnswerError) as exc:
            raise InputUnavailable(
                f"the answer {name!r} cannot answer input request {key!r} "
                f"({m.engine._events.input_kind(request)}): {exc}"
            ) from exc
        return response


def _kind_of_method(name: str) -> str:
    return capability_of(name)


def _kinds_of_keyed_entry(value: Any) -> set[str]:
    # A key names no method, so the entry's shape says what it can answer.
    if value in ("accept", "decline", "cancel") or (isinstance(value, dict) and "action" in value):
        return {_FORM, _URL}
    if isinstance(value, str) or (isinstance(value, dict) and "model" in value):
        return {_SAMPLING}
    if isinstance(value, list) or (isinstance(value, dict) and "roots" in value):
        return {_ROOTS}
    return set()


def _response_for_entry(name: str, value: Any, kind: str) -> m.wire.InputResponse:
    """Entry ``name`` as the response to an input request of ``kind`` (as
    ``m.engine._events.input_kind`` names it), shorthands expanded; the response's type is
    the core's answer to ``kind``."""
    expected = response_type_for(kind)
    try:
        response = m.wire.structure(_expand_shorthand(value, expected), expected)
        _check_entry(kind, response)
    except m.MrtrError as exc:
        raise AnswersError(f"entry {name!r}: {exc}") from exc
    except AnswersError as exc:
        raise AnswersError(f"entry {name!r}: {exc}") from exc
    return cast(m.wire.InputResponse, response)


def _expand_shorthand(value: Any, expected: type[Any]) -> Any:
    """An entry's shorthand as the response it stands for (anything else as it is)."""
    if expected is m.wire.ElicitResult and isinstance(value, str):
        return {"action": value}
    if expected is m.wire.CreateMessageResult and isinstance(value, str):
        return {
            "role": "assistant",
            "content": {"type": "text", "text": value},
            "model": HUMAN_MODEL,
            "stopReason": "endTurn",
        }
    if expected is m.wire.ListRootsResult and isinstance(value, list):
        return {"roots": [{"uri": uri} if isinstance(uri, str) else uri for uri in value]}
    return value


def _check_entry(kind: str, response: Any) -> None:
    """What the response types leave open: known actions and roles, ``file://`` roots."""
    if isinstance(response, m.wire.ElicitResult):
        if response.action not in ("accept", "decline", "cancel"):
            raise AnswersError(f"unknown action {response.action!r}")
        if kind == _URL_ENTRY and response.content is not None:
            raise AnswersError("a URL-mode answer carries no content")
    elif isinstance(response, m.wire.CreateMessageResult):
        if response.role not in ("user", "assistant"):
            raise AnswersError(f"unknown role {response.role!r}")
    elif isinstance(response, m.wire.ListRootsResult):
        for root in response.roots:
            check_root_uri(root.uri)


# --- The handler --------------------------------------------------------------------------


class CliAnswerer:
    """The ``InputHandler`` of ``mrtr call``: book, then ``--decline-all``, then terminal."""

    def __init__(
        self,
        book: AnswerBook | None = None,
        *,
        terminal: Terminal | None = None,
        decline_all: bool = False,
        notices: TextIO | None = None,
    ) -> None:
        self.book = book or AnswerBook()
        self.terminal = terminal
        self.decline_all = decline_all
        #: Where what the user must see without a prompt goes (default stderr).
        self.notices = notices
        # One prompt at a time: requests of one round (or of parallel calls) queue here.
        self._prompt_lock = anyio.Lock()

    def capabilities(self) -> dict[str, Any]:
        """Exactly the client capabilities these sources can answer."""
        kinds = self.book.answerable()
        if self.terminal is not None:
            kinds |= {_FORM, _URL, _SAMPLING, _ROOTS}
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

    async def __call__(self, key: str, request: m.wire.InputRequest) -> m.wire.InputResponse:
        found = self.book.lookup(key, request)
        if found is not None:
            response = self.book.response(found[0], key, request)
            if isinstance(request, m.wire.ElicitUrlRequest) and response == ACCEPTED:
                # Consent given in advance: the person still needs to see the URL, whole,
                # and a URL no one may consent to is declined all the same.
                if not show_url_request(self._notice, request):
                    return m.wire.ElicitResult(action="decline")
                self._notice(WAITING_FOR_SERVER)
            return response
        elicitation = isinstance(request, (m.wire.ElicitFormRequest, m.wire.ElicitUrlRequest))
        if self.decline_all and elicitation:
            return m.wire.ElicitResult(action="decline")
        if self.terminal is not None:
            async with self._prompt_lock:
                try:
                    return await self._prompt(request)
                except PromptAborted as exc:
                    raise InputUnavailable(
                        f"input request {key!r} ({m.engine._events.input_kind(request)}): {exc}"
                    ) from exc
        raise InputUnavailable(no_answer_message(key, request, self.terminal is not None))

    def _notice(self, text: str) -> None:
        out = self.notices or sys.stderr
        out.write(shown(text) + "\n")
        out.flush()

    async def _prompt(self, request: m.wire.InputRequest) -> m.wire.InputResponse:
        assert self.terminal is not None
        if isinstance(request, m.wire.ElicitFormRequest):
            return await prompt_form(self.terminal, request)
        if isinstance(request, m.wire.ElicitUrlRequest):
            return await prompt_url(self.terminal, request)
        if isinstance(request, m.wire.ListRootsRequest):
            return await prompt_roots(self.terminal, request)
        assert isinstance(request, m.wire.CreateMessageRequest)
        return await prompt_sampling(self.terminal, request)


def no_answer_message(key: str, request: m.wire.InputRequest, terminal: bool) -> str:
    """What to say when nothing can answer ``key``: the key, the method, how to answer."""
    kind = m.engine._events.input_kind(request)
    if isinstance(request, m.wire.ListRootsRequest):
        how = "pass --root file:///... (or a roots/list answer)"
    else:
        how = f'add "{key}" or "{kind}" to --answers FILE, or pass --answer {key}=JSON'
    where = "" if terminal else " and stdin is not a terminal"
    return f"no answer for input request {key!r} ({kind}){where}: {how}"
