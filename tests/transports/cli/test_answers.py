"""Answers for ``mrtr call``: the book (precedence, shorthands, validation), the declared
capabilities, and the terminal prompts driven through a real pseudo-terminal."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
from mrtr_transports.cli.answers import (
    AnswerBook,
    AnswersError,
    CliAnswerer,
    Terminal,
    check_value,
    parse_answer_arg,
)
from mrtr_transports.client.errors import InputUnavailable
from support.cli_pty import PtyUser

import mrtr_core as m

FORM = m.server.elicit_form(
    "Where are you?", {"city": {"type": "string", "title": "City"}}, required=["city"]
)
URL = m.server.elicit_url("Sign in to continue", "https://auth.example.com/login?state=abc")
SAMPLE = m.server.sample("Summarize the weather", max_tokens=50, system_prompt="Be brief")
ROOTS = m.server.list_roots()

PERSON = m.server.elicit_form(
    "Tell us about you",
    {
        "name": {"type": "string", "minLength": 2},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "subscribe": {"type": "boolean", "default": True},
        "plan": {
            "type": "string",
            "oneOf": [{"const": "free", "title": "Free"}, {"const": "pro", "title": "Pro"}],
        },
        "nickname": {"type": "string"},
        "topics": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}},
    },
    required=["name", "age", "plan"],
)


# --- The book ----------------------------------------------------------------------------


def write_answers(tmp_path, entries: Any) -> str:
    path = tmp_path / "answers.json"
    path.write_text(json.dumps(entries))
    return str(path)


def test_a_key_entry_wins_over_a_method_entry(tmp_path):
    path = write_answers(
        tmp_path,
        {
            "city": {"action": "accept", "content": {"city": "Paris"}},
            "elicitation/create": {"action": "decline"},
        },
    )
    book = AnswerBook.load(path)
    assert book.lookup("city", FORM) == ("city", book.entries["city"])
    assert book.lookup("other", FORM) == ("elicitation/create", {"action": "decline"})
    assert book.response("city", "city", FORM) == m.wire.ElicitResult(
        action="accept", content={"city": "Paris"}
    )


def test_url_mode_has_its_own_method_entry():
    book = AnswerBook({"elicitation/create": "decline", "elicitation/create#url": "accept"})
    assert book.lookup("login", URL)[0] == "elicitation/create#url"
    assert book.lookup("where", FORM)[0] == "elicitation/create"
    assert book.response("elicitation/create#url", "login", URL) == m.wire.ElicitResult(
        action="accept"
    )
    assert AnswerBook({"elicitation/create": "accept"}).lookup("login", URL) is None


def test_in_a_2025_session_the_key_is_the_method_and_url_mode_keeps_its_entry():
    book = AnswerBook({"elicitation/create": "decline", "elicitation/create#url": "accept"})
    assert book.lookup("elicitation/create", URL)[0] == "elicitation/create#url"
    assert book.lookup("elicitation/create", FORM)[0] == "elicitation/create"


def test_answer_arguments_add_entries_and_win_over_the_file(tmp_path):
    path = write_answers(tmp_path, {"city": "decline", "keep": "cancel"})
    book = AnswerBook.load(path, ['city={"action":"accept","content":{"city":"Oslo"}}'])
    assert book.entries["city"]["content"] == {"city": "Oslo"}
    assert book.entries["keep"] == "cancel"
    assert parse_answer_arg('k={"x": 1}') == ("k", {"x": 1})
    assert parse_answer_arg('a="b=c"') == ("a", "b=c")  # the first '=' splits


def test_shorthands_expand_to_protocol_answers():
    book = AnswerBook(
        {
            "sampling/createMessage": "It is sunny.",
            "roots/list": ["file:///home/ada/project"],
            "where": "cancel",
        }
    )
    sampled = book.response("sampling/createMessage", "s", SAMPLE)
    assert sampled == m.wire.CreateMessageResult(
        role="assistant",
        content={"type": "text", "text": "It is sunny."},
        model="human (mrtr call)",
        stop_reason="endTurn",
    )
    roots = book.response("roots/list", "r", ROOTS)
    assert roots == m.wire.ListRootsResult(roots=[m.wire.Root(uri="file:///home/ada/project")])
    assert book.response("where", "where", FORM) == m.wire.ElicitResult(action="cancel")


def test_roots_come_from_root_arguments_and_are_validated():
    book = AnswerBook.load(roots=["file:///srv/a", "file://localhost/srv/b"])
    assert book.response("roots/list", "r", ROOTS) == m.wire.ListRootsResult(
        roots=[m.wire.Root(uri="file:///srv/a"), m.wire.Root(uri="file://localhost/srv/b")]
    )
    for bad in ("https://example.com/x", "file:relative/path", "file://host/x", "/plain/path"):
        with pytest.raises(AnswersError, match="--root"):
            AnswerBook.load(roots=[bad])
    with pytest.raises(AnswersError, match="either with --root or as a roots/list"):
        AnswerBook.load(answer_args=['roots/list=["file:///x"]'], roots=["file:///y"])


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("not json {", "not JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"elicitation/create": {"action": "maybe"}}', "maybe"),
        ('{"sampling/createMessage": {"role": "assistant"}}', "sampling/createMessage"),
        ('{"roots/list": ["https://x"]}', "file://"),
    ],
)
def test_an_unusable_answers_file_is_a_usage_error(tmp_path, content, problem):
    path = tmp_path / "answers.json"
    path.write_text(content)
    with pytest.raises(AnswersError, match=problem):
        AnswerBook.load(str(path))


def test_unusable_answer_arguments_and_missing_files_are_usage_errors(tmp_path):
    for bad in ("no-equals-sign", "=1", "k=not json"):
        with pytest.raises(AnswersError, match="--answer"):
            AnswerBook.load(answer_args=[bad])
    with pytest.raises(AnswersError, match="--answers"):
        AnswerBook.load(str(tmp_path / "missing.json"))


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"action": "accept", "content": {}}, "required field 'city' is missing"),
        ({"action": "accept", "content": {"city": 5}}, "field 'city': 5 is not of type"),
        ({"action": "decline", "content": {"city": "x"}}, "carries no content"),
        ("It is sunny", "ElicitResult"),  # a sampling-shaped answer for a form
    ],
)
def test_an_answer_that_does_not_fit_the_request_is_not_sent(entry, problem):
    book = AnswerBook({"city": entry})
    with pytest.raises(InputUnavailable, match=problem) as caught:
        book.response("city", "city", FORM)
    assert "'city'" in str(caught.value) and "elicitation/create" in str(caught.value)


def test_values_are_checked_against_the_field_schema():
    # The reasons are the core validator's (jsonschema-rs) wording: one validator for the
    # client's check and the server's, so what passes here the server accepts.
    assert check_value({"type": "integer", "maximum": 3}, 4) == "4 is greater than the maximum of 3"
    assert check_value({"type": "integer"}, 2.5) == '2.5 is not of type "integer"'
    assert check_value({"type": "number"}, True) == 'true is not of type "number"'
    assert check_value({"type": "boolean"}, "yes") == '"yes" is not of type "boolean"'
    assert check_value({"type": "string", "enum": ["a", "b"]}, "c") == "choose one of: a, b"
    assert check_value({"type": "string", "format": "email"}, "ada@example.com") is None
    assert check_value({"type": "string", "format": "email"}, "ada") == '"ada" is not a "email"'
    assert check_value({"type": "string", "format": "date"}, "2026-07-28") is None
    assert check_value({"type": "string", "format": "date"}, "2026-13-28") is not None
    assert check_value({"type": "array", "items": {"enum": ["a"]}}, ["a", "z"]) == (
        '"z" is not one of "a"'
    )
    assert check_value({"type": "string", "maxLength": 2}, "abc") == (
        '"abc" is longer than 2 characters'
    )
    assert check_value({"type": "no such type"}, "abc") is None  # the server judges it


# --- Capabilities ------------------------------------------------------------------------


def test_the_client_declares_exactly_what_it_can_answer():
    def caps(book: AnswerBook, **options: Any) -> dict[str, Any]:
        return CliAnswerer(book, **options).capabilities()

    assert caps(AnswerBook()) == {}
    assert caps(AnswerBook({"elicitation/create": "decline"})) == {"elicitation": {"form": {}}}
    assert caps(AnswerBook({"elicitation/create#url": "accept"})) == {"elicitation": {"url": {}}}
    assert caps(AnswerBook({"sampling/createMessage": "hi"})) == {"sampling": {}}
    assert caps(AnswerBook.load(roots=["file:///a"])) == {"roots": {}}
    # A key names no method: the entry's shape says what it answers.
    assert caps(AnswerBook({"city": {"action": "accept"}})) == {
        "elicitation": {"form": {}, "url": {}}
    }
    assert caps(AnswerBook({"llm": {"role": "assistant", "content": {}, "model": "x"}})) == {
        "sampling": {}
    }
    assert caps(AnswerBook(), decline_all=True) == {"elicitation": {"form": {}, "url": {}}}
    with open(os.devnull) as infile, open(os.devnull, "w") as outfile:
        terminal = Terminal(infile, outfile)
        # A terminal answers elicitation, sampling and roots (typed as paths or URIs).
        assert caps(AnswerBook(), terminal=terminal) == {
            "elicitation": {"form": {}, "url": {}},
            "sampling": {},
            "roots": {},
        }


# --- The handler without a terminal ------------------------------------------------------


async def test_no_answer_and_no_terminal_names_the_key_and_the_method():
    answerer = CliAnswerer(AnswerBook())
    with pytest.raises(InputUnavailable) as caught:
        await answerer("city", FORM)
    message = str(caught.value)
    assert "'city'" in message and "(elicitation/create)" in message
    assert "stdin is not a terminal" in message and "--answer city=JSON" in message
    with pytest.raises(InputUnavailable, match=r"\(roots/list\).*--root"):
        await answerer("where", ROOTS)


async def test_decline_all_declines_elicitations_but_answers_from_the_book_first():
    answerer = CliAnswerer(AnswerBook({"login": "accept"}), decline_all=True)
    assert await answerer("city", FORM) == m.wire.ElicitResult(action="decline")
    assert await answerer("other", URL) == m.wire.ElicitResult(action="decline")
    assert await answerer("login", URL) == m.wire.ElicitResult(action="accept")
    with pytest.raises(InputUnavailable, match="sampling/createMessage"):
        await answerer("llm", SAMPLE)


# --- Prompts on a real pseudo-terminal ---------------------------------------------------


@pytest.fixture
async def user() -> AsyncIterator[PtyUser]:
    person = PtyUser()
    try:
        yield person
    finally:
        await person.aclose()


def answerer_on(user: PtyUser, book: AnswerBook | None = None) -> CliAnswerer:
    infile, outfile = user.terminal_files()
    return CliAnswerer(book, terminal=Terminal(infile, outfile))


class Asked:
    """Runs one answerer call in the background and keeps its outcome."""

    def __init__(self) -> None:
        self.value: Any = None
        self.error: BaseException | None = None
        self.done = trio.Event()

    async def run(self, answerer: CliAnswerer, key: str, request: m.wire.InputRequest) -> None:
        try:
            self.value = await answerer(key, request)
        except InputUnavailable as exc:
            self.error = exc
        self.done.set()

    async def result(self) -> Any:
        with trio.fail_after(5):
            await self.done.wait()
        if self.error is not None:
            raise self.error
        return self.value


async def test_a_form_is_filled_field_by_field_with_validation_and_defaults(user, nursery):
    answerer = answerer_on(user)
    asked = Asked()
    nursery.start_soon(asked.run, answerer, "person", PERSON)
    screen = await user.expect("[a]ccept / [d]ecline / [c]ancel: ")
    assert "Tell us about you" in screen
    await user.type("a\n")
    await user.expect("name (string, required")
    await user.type("\n")  # required: asked again
    await user.expect("this field is required")
    await user.type("A\n")  # too short: asked again
    await user.expect('"A" is shorter than 2 characters')
    await user.type("Ada\n")
    await user.expect("age (integer, required, min 0, max 150): ")
    await user.type("old\n")
    await user.expect("expected a whole number")
    await user.type("200\n")
    await user.expect("200 is greater than the maximum of 150")
    await user.type("36\n")
    await user.expect("subscribe (boolean, optional, default true): ")
    await user.type("\n")  # the default
    screen = await user.expect("plan (string, required): ")
    assert "1) Free (free)" in screen and "2) Pro (pro)" in screen
    await user.type("3\n")
    await user.expect("choose a number from 1 to 2")
    await user.type("2\n")
    await user.expect("nickname (string, optional): ")
    await user.type("\n")  # optional, no default: left out
    await user.expect("topics (list, comma separated, optional): ")
    await user.type("1, c\n")
    assert await asked.result() == m.wire.ElicitResult(
        action="accept",
        content={"name": "Ada", "age": 36, "subscribe": True, "plan": "pro", "topics": ["a", "c"]},
    )


@pytest.mark.parametrize(("key", "action"), [("d", "decline"), ("c", "cancel")])
async def test_decline_and_cancel_are_distinct_answers(user, nursery, key, action):
    asked = Asked()
    nursery.start_soon(asked.run, answerer_on(user), "city", FORM)
    await user.expect("[c]ancel: ")
    await user.type("maybe\n")
    await user.expect("please answer a / d / c")
    await user.type(f"{key}\n")
    assert await asked.result() == m.wire.ElicitResult(action=action)


async def test_url_mode_shows_the_full_url_before_asking_consent(user, nursery):
    asked = Asked()
    nursery.start_soon(asked.run, answerer_on(user), "login", URL)
    screen = await user.expect("Open it? [y]es / [d]ecline / [c]ancel: ")
    assert screen.index("https://auth.example.com/login?state=abc") < screen.index("Open it?")
    assert "host: auth.example.com" in screen
    await user.type("y\n")
    # Consent is the answer (2026-07-28); the server says when the visit is done.
    await user.expect("Waiting for the server to hear back from your browser")
    assert await asked.result() == m.wire.ElicitResult(action="accept")


async def test_url_mode_consent_can_be_refused(user, nursery):
    asked = Asked()
    nursery.start_soon(asked.run, answerer_on(user), "login", URL)
    await user.expect("Open it?")
    await user.type("d\n")
    assert await asked.result() == m.wire.ElicitResult(action="decline")


async def test_sampling_is_typed_by_the_user(user, nursery):
    asked = Asked()
    nursery.start_soon(asked.run, answerer_on(user), "llm", SAMPLE)
    screen = await user.expect("Reply (one line; /refuse to refuse): ")
    assert "system: Be brief" in screen and "user: Summarize the weather" in screen
    await user.type("Sunny, 21 C\n")
    result = await asked.result()
    assert result.content == {"type": "text", "text": "Sunny, 21 C"}
    assert result.role == "assistant"


async def test_refusing_sampling_is_no_answer(user, nursery):
    asked = Asked()
    nursery.start_soon(asked.run, answerer_on(user), "llm", SAMPLE)
    await user.expect("Reply")
    await user.type("/refuse\n")
    with pytest.raises(InputUnavailable, match="refused"):
        await asked.result()


async def test_end_of_input_at_a_prompt_is_an_abort_not_a_decline(user, nursery):
    asked = Asked()
    nursery.start_soon(asked.run, answerer_on(user), "city", FORM)
    await user.expect("[c]ancel: ")
    await user.type("\x04")  # Ctrl-D at the start of a line: end of input
    with pytest.raises(InputUnavailable, match=r"'city'.*end of input"):
        await asked.result()


async def test_ctrl_c_at_a_prompt_stops_everything_and_answers_nothing(user, nursery):
    async def press_ctrl_c() -> None:
        await user.expect("[c]ancel: ")  # the prompt is up: SIGINT is caught by it now
        os.kill(os.getpid(), signal.SIGINT)

    nursery.start_soon(press_ctrl_c)
    with trio.fail_after(5), pytest.raises(KeyboardInterrupt):
        await answerer_on(user)("city", FORM)  # neither an answer nor InputUnavailable
    assert (await user.drain()).endswith("\n")  # the prompt's line was ended


async def test_requests_arriving_together_are_asked_one_at_a_time(user, nursery):
    answerer = answerer_on(user)
    form, sampling = Asked(), Asked()
    nursery.start_soon(form.run, answerer, "city", FORM)
    nursery.start_soon(sampling.run, answerer, "llm", SAMPLE)
    # trio does not promise which task starts first; whichever does has the terminal.
    prompts = {"form": "[c]ancel: ", "sampling": "Reply (one line; /refuse to refuse): "}
    headers = {"form": "Where are you?", "sampling": "model reply"}
    keys = {"form": "a\nOslo\n", "sampling": "ok\n"}
    order = []
    for _ in range(2):
        with trio.fail_after(5):
            while not any(p in user.output[user._seen :] for p in prompts.values()):
                await user.drain(0.01)
        current = next(n for n, p in prompts.items() if p in user.output[user._seen :])
        order.append(current)
        screen = await user.expect(prompts[current])
        other = "sampling" if current == "form" else "form"
        if len(order) == 1:
            assert headers[other] not in screen + await user.drain()  # it waits its turn
        await user.type(keys[current])
    assert sorted(order) == ["form", "sampling"]
    assert await form.result() == m.wire.ElicitResult(action="accept", content={"city": "Oslo"})
    assert (await sampling.result()).content["text"] == "ok"


async def test_book_answers_need_no_terminal_even_when_one_exists(user):
    answerer = answerer_on(user, AnswerBook({"city": "decline"}))
    with trio.fail_after(2):
        assert await answerer("city", FORM) == m.wire.ElicitResult(action="decline")
    assert user.output == "" and await user.drain() == ""
