"""An app author's types: ``ctx.answer`` typed by the ask, every host takes an ``McpApp``.

``support/typed_user_app.py`` is the user's program: it runs here, and ``mypy --strict``
must accept it as it stands (its ``assert_type`` lines are checked).  Beside it, a plain
class with attributes matches ``ServerApp`` too, and a wrong program fails where a type
checker should catch the mistake, so the check is known to bite.
"""

from __future__ import annotations

import re
from pathlib import Path

from support import typed_user_app
from support.typecheck import mypy_errors

#: A ``ServerApp`` by shape, with plain attributes, handed to every host and the test client.
PLAIN_APP = """\
from collections.abc import Mapping, Sequence
from typing import Any

import mrtr_core as m
from mrtr_transports import (
    HttpServer, McpAsgi, Outlet, TestClient, WsServer, serve_http, serve_stdio, serve_ws,
)


class PlainApp:
    def __init__(self) -> None:
        self.info: Mapping[str, Any] = {"name": "plain", "version": "1"}
        self.capabilities: Mapping[str, Any] = {"tools": {}}
        self.instructions: str | None = None

    async def handle(
        self, request: m.Request, info: m.server.RequestInfo, outlet: Outlet
    ) -> Mapping[str, Any]:
        return {"content": []}

    def tool_header_params(self, name: str) -> Mapping[str, Sequence[str]] | None:
        return None


async def serve(app: PlainApp) -> None:
    await serve_stdio(app)
    await serve_http(app)
    await serve_ws(app)


def hosts(app: PlainApp) -> tuple[HttpServer, WsServer, McpAsgi, TestClient]:
    return HttpServer(app), WsServer(app), McpAsgi(app), TestClient(app)
"""

#: Each mistake on its own line, with what mypy must say about it.
WRONG_APP = """\
from typing import assert_type

from mrtr_transports import Context, ElicitResult, McpApp, TestClient, list_roots, sample

app = McpApp("wrong", "1.0")
POEM = sample("A line about rain", max_tokens=40)
ROOTS = list_roots()


@app.tool()
def poem(ctx: Context) -> str:
    answer = ctx.answer("poem", POEM)
    assert_type(answer, ElicitResult | None)
    return answer.action if answer is not None else ""


@app.tool()
def where(ctx: Context) -> int:
    return len(ctx.answer("roots", ROOTS).roots)


client = TestClient(app.info)
"""
WRONG_LINES = {
    13: r'Expression is of type "CreateMessageResult \| None", not "ElicitResult \| None"',
    14: r'"CreateMessageResult" has no attribute "action"',
    19: r'Item "None" of "ListRootsResult \| None" has no attribute "roots"',
    22: r'Argument 1 to "TestClient" has incompatible type .*; expected "ServerApp"',
}


async def test_the_users_program_calls_both_tools() -> None:
    introduced, signed_in = await typed_user_app.calls()
    assert introduced["content"] == [
        {"type": "text", "text": "Ada (test-model: rain on the roof) in file:///home/ada"}
    ]
    assert signed_in["content"] == [{"type": "text", "text": "sign-in: accept"}]


def test_mypy_strict_takes_each_answer_as_its_asks_type_and_an_app_on_every_host(
    tmp_path: Path,
) -> None:
    (tmp_path / "plain_app.py").write_text(PLAIN_APP)
    (tmp_path / "wrong_app.py").write_text(WRONG_APP)
    program = Path(typed_user_app.__file__)
    errors = mypy_errors(
        [program, tmp_path / "plain_app.py", tmp_path / "wrong_app.py"], "--strict", cwd=tmp_path
    )
    assert not [e for e in errors if "wrong_app.py" not in e], errors
    found = {int(e.split(":")[1]): e for e in errors}
    assert sorted(found) == sorted(WRONG_LINES), errors
    for line, expected in WRONG_LINES.items():
        assert re.search(expected, found[line]), found[line]
