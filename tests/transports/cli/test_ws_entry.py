"""``mrtr serve --ws``: its options, and its bounds and shutdown as a real subprocess."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from mrtr_transports.cli import serve
from support.ws_peer import WsPeer, connect
from wsproto.events import TextMessage

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--ws", "8000"], "--ws '8000': expected HOST:PORT"),
        (["--ws", "127.0.0.1:0", "--head-timeout", "3"], "only --max-connections applies"),
        (["--http", "127.0.0.1:0", "--ping-interval", "3"], "only apply to --ws"),
        (["--stdio", "--max-message-size", "10"], "only apply to --ws"),
        (["--ws", "127.0.0.1:0", "--ping-timeout", "0"], "--ping-timeout must be more than 0"),
        (["--ws", "127.0.0.1:0", "--drain-timeout", "-1"], "--drain-timeout must be"),
    ],
)
def test_options_that_do_not_fit_ws_are_usage_errors(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert serve.main(argv) == 2
    said = capsys.readouterr()
    assert said.out == "" and words in said.err, said.err


def test_ws_and_http_are_exclusive(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        serve.main(["--ws", "127.0.0.1:0", "--http", "127.0.0.1:0"])
    assert caught.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


@pytest.mark.subprocess
@pytest.mark.parametrize("loop", ["trio", "asyncio"])
async def test_the_ws_bounds_reach_the_server_and_sigterm_closes_with_1001(loop: str) -> None:
    argv = [sys.executable, "-m", "mrtr_transports", "serve", "--ws", "127.0.0.1:0"]
    argv += ["--loop", loop]  # (the endpoint on the host: either loop)
    argv += ["--max-message-size", "300", "--ping-interval", "0.1", "--ping-timeout", "1"]
    argv += ["--allow-origin", "https://app.example"]
    process = await trio.lowlevel.open_process(argv, stderr=subprocess.PIPE, cwd=ROOT)
    try:
        assert process.stderr is not None
        said = b""
        with trio.fail_after(20):
            while b"listening on" not in said or not said.endswith(b"\n"):
                said += await process.stderr.receive_some(4096)
        assert b"listening on ws://127.0.0.1:" in said, said
        port = int(said.split(b"ws://127.0.0.1:")[1].split(b"/")[0])
        address = ("127.0.0.1", port)
        with trio.fail_after(10):
            big = await connect(address, headers=[("Origin", "https://app.example")])
            assert isinstance(big, WsPeer)
            await big.send_event(TextMessage(data="[" + " " * 400 + "]"))
            assert (await big.wait_closed()).code == 1009
            silent = await connect(address)
            assert isinstance(silent, WsPeer)
            silent.answer_pings = False
            assert (await silent.wait_closed()).code == 1011
            staying = await connect(address)
            assert isinstance(staying, WsPeer)
            await staying.read_messages_for(0.3)  # answering pings: still open
            process.send_signal(signal.SIGTERM)
            closed = await staying.wait_closed()
            assert closed.code == 1001
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
