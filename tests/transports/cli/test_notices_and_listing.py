"""The lines ``mrtr call`` and ``mrtr list`` print from what a server sent: safe and readable.

Pure functions over what a server could send (the subprocess tests in
``test_calling.py`` show them end to end): control characters never reach the
terminal, lines are bounded, odd numbers and odd schemas still read.
"""

from __future__ import annotations

import io
import math

from mrtr_transports.cli.listing import describe_schema, show_entries
from mrtr_transports.cli.notices import (
    MAX_NOTICE,
    Notices,
    describe_log,
    describe_progress,
    one_line,
)
from mrtr_transports.client.http_connection import MAX_ERROR_TEXT, error_body_text

import mrtr_core as m


def progress(value: float, total: float | None = None, message: str | None = None) -> m.Progress:
    return m.Progress(request_id=1, progress=value, total=total, message=message)


def test_one_line_escapes_every_control_character_and_is_bounded():
    # (issue 22: shown escaped, not as "?", so the person sees what was there)
    assert one_line("a\x1b[2Jb\x07c\x9bd\x7fe") == "a\\x1b[2Jb\\x07c\\x9bd\\x7fe"
    assert one_line("moc.\u202elive") == "moc.\\u202elive"
    assert one_line("one\ntwo\r\nthree\tfour") == "one two  three four"
    long = one_line("x" * (MAX_NOTICE * 3))
    assert len(long) == MAX_NOTICE and long.endswith("…")


def test_progress_reads_whatever_numbers_came():
    assert describe_progress(progress(2, 8, "two")) == "progress 2/8 (25%): two"
    assert describe_progress(progress(3)) == "progress 3"
    assert describe_progress(progress(0.5, 0)) == "progress 0.5/0"  # no percentage of nothing
    assert describe_progress(progress(math.inf, 10)) == "progress inf/10"
    assert describe_progress(progress(1, 2, "a\nb\x1b")) == "progress 1/2 (50%): a b\\x1b"


def test_log_lines_read_whatever_params_came():
    assert describe_log({"level": "error", "data": "disk"}) == "log error: disk"
    assert describe_log({"level": "info", "logger": "db", "data": [1, {"a": None}]}) == (
        'log info [db]: [1, {"a": null}]'
    )
    assert describe_log({"level": 5, "data": None}) == "log ?: null"
    assert describe_log(None) == "log ?: null"


def test_notices_keep_to_the_log_level_and_skip_other_notifications():
    out = io.StringIO()
    notices = Notices(out, "warning")
    for level in ("debug", "info", "warning", "critical", "made-up"):
        notices.on_notification(
            m.Notification(method="notifications/message", params={"level": level, "data": "x"})
        )
    notices.on_notification(m.Notification(method="notifications/tools/list_changed"))
    notices.on_progress(progress(1, 2))
    assert out.getvalue().splitlines() == [
        "log warning: x",
        "log critical: x",
        "log made-up: x",  # a level we do not know is shown, never dropped unseen
        "progress 1/2 (50%)",
    ]


def test_an_error_body_is_one_safe_bounded_line():
    page = b"<html><title>Gone</title>\n<p>\x1b[31mUse /mcp\x1b[0m\r\n\x00now</p></html>"
    assert error_body_text(page) == "Gone Use /mcp now"
    assert error_body_text(b"\xff\xfe bad utf-8") == "\ufffd\ufffd bad utf-8"
    text = error_body_text(b"y" * 100_000)
    assert len(text) == MAX_ERROR_TEXT and text.endswith("...")
    assert error_body_text(b"") == ""


def test_schemas_read_as_one_line_per_argument():
    schema = {
        "type": "object",
        "properties": {
            "when": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "When"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "size": {"type": ["integer", "null"], "default": None},
            "kind": {"const": "fixed"},
            "where": {
                "type": "object",
                "properties": {"lat": {"type": "number"}},
                "required": ["lat"],
            },
            "odd": "not a schema",
            "line\nbreak": {"type": "string", "description": "evil\x1b[2J"},
        },
        "required": ["when"],
    }
    assert describe_schema(schema) == [
        "    when        string | null, required  When",
        "    tags        array of string",
        "    size        integer | null, default null",
        '    kind        = "fixed"',
        "    where       object",
        "      lat  number, required",
        "    odd         any",
        "    line break  string  evil\\x1b[2J",
    ]
    assert describe_schema({"type": "object"}) == ["    (no arguments)"]
    assert describe_schema(None) == []


def test_entries_of_every_kind_read():
    assert show_entries("tools", []) == ["(no tools)"]
    assert show_entries("prompts", [{"name": "p", "arguments": [{"name": "a"}, "junk"]}]) == [
        "p",
        "    a  string",
    ]
    assert show_entries("templates", [{"uriTemplate": "x://{id}", "name": "t"}]) == [
        "x://{id}",
        "    name t",
    ]
    assert show_entries("resources", [{"uri": "x://1"}]) == ["x://1"]
