"""The branches of mrtr_core no peer can reach, each with its reason: ``replay.py``
reports coverage of *all* branches and of the *peer-reachable* ones (all minus these).

Two kinds of entry:

* ``RULES``: a statement whose source starts with one of these is excluded wherever it
  is.  ``raise LocalProtocolError(`` is the rule's core: ``LocalProtocolError`` is the
  documented error for misuse of our own API, so by construction no peer byte may
  reach one (the fuzz targets would report it if one did: they let it out only from
  the app's own calls).
* ``EXCLUSIONS``: one statement (and the block under it) or one whole function,
  named by ``anchor``: ``"def name"`` / ``"def Class.name"`` for a function, else a
  substring of exactly one source line of the module (``replay.py`` fails on an
  anchor that matches no line or several, so the list cannot go stale silently).

A branch is excluded when it starts in, or leads into, an excluded statement.
"""

from __future__ import annotations

from typing import NamedTuple


class Exclusion(NamedTuple):
    module: str  # under mrtr_core/, e.g. "_connection/_options.py"
    anchor: str
    reason: str


APP_MISUSE = "a check of our own API's arguments (misuse raises LocalProtocolError)"
ENCODER = "encodes what we write; the fuzz targets feed what a peer sends"

RULES: dict[str, str] = {
    "raise LocalProtocolError(": APP_MISUSE,
    "self._misuse(": APP_MISUSE + " (the engine's own wrapper)",
}

OPTION = "depends only on how the app configured this object, never on the peer"
APP_CALL = "the app's own call (how and when it calls our API), not the peer's input"
STORE = "the app's storage or environment, which no peer byte chooses"

EXCLUSIONS: tuple[Exclusion, ...] = (
    # --- Options and checks of our own arguments (beyond the raise statements) -------
    Exclusion("engine/_engine.py", "def _check_limit", APP_MISUSE),
    Exclusion(
        "_connection/_options.py", "if isinstance(json, Codec) and max_depth is None:", OPTION
    ),
    Exclusion("_connection/_connection.py", "if capabilities is None:", OPTION),
    Exclusion("_connection/_requests.py", "if self._info is not None:", OPTION),
    Exclusion(
        "engine/_rounds.py",
        "if not isinstance(response, expected):",
        "the app answering with the wrong class: API misuse, reported through _misuse",
    ),
    Exclusion("server/_asking.py", "if isinstance(prompt, str):", APP_CALL),
    # --- Encoding what we write ---------------------------------------------------------
    Exclusion("http/_sse.py", "def encode_sse", ENCODER),
    Exclusion("http/_sse.py", "def encode_sse_comment", ENCODER),
    Exclusion("http/_sse.py", "def _single_line", ENCODER),
    Exclusion("wire/_codec.py", "def _default", ENCODER + " (mappings and model objects)"),
    Exclusion(
        "http/_client_sessions.py",
        "def session_headers",
        ENCODER + " (the headers of our own request, for the method we send)",
    ),
    Exclusion(
        "websocket/_binding.py",
        "def close_reason",
        ENCODER + " (the reason of a close frame we send)",
    ),
    Exclusion("wire/_convert.py", "def unstructure_input_required", ENCODER),
    Exclusion(
        "wire/_convert.py",
        "if len(reason) > _MAX_REASON:",
        "a backstop: the conversion hooks' messages name types, never peer values",
    ),
    # --- The app's timing and its own API ----------------------------------------------
    Exclusion(
        "_connection/_our_requests.py",
        'kind = "LogMessage" if method == "notifications/message" else "Progress"',
        APP_MISUSE + " (a progress or log notification sent by hand)",
    ),
    Exclusion(
        "_connection/_calls.py",
        "while len(self.cancel_targets) > self._outgoing.finished.limit:",
        "bounds the CancelLeg events the app has not sent yet: the app's timing",
    ),
    Exclusion(
        "_connection/_requests.py",
        "while self._next_id in self.requests or self._next_id in finished:",
        "skips ids the app chose itself for its own requests: the app's doing",
    ),
    Exclusion("_connection/_connection.py", "if self._calls.ever_started(call):", APP_CALL),
    Exclusion(
        "server/_sealing.py",
        "def StateSealer.consume",
        "an app-side alternative to spend_redeemed; run_handler spends through the store",
    ),
    # --- The environment and the app's storage ------------------------------------------
    Exclusion("wire/_codec.py", "if orjson is None:", STORE + " (whether orjson is installed)"),
    Exclusion(
        "server/_validation.py",
        "if len(_compiled) > MAX_COMPILED_SCHEMAS:",
        STORE + " (how many distinct schemas the server app compiles)",
    ),
    # --- Bounded before it gets here ----------------------------------------------------
    Exclusion(
        "server/_sealing.py",
        'and "s" in payload',
        "checked after the MAC matched: only a token sealed with our key gets here, and "
        "no peer holds the key",
    ),
    Exclusion(
        "server/_sealing.py",
        "if deeper_than(value, DEFAULT_MAX_DEPTH):",
        "every peer value passed the codec's max_depth (128) with its envelope, so its "
        "params are shallower than this bound",
    ),
    Exclusion(
        "_errors.py",
        'return f"<{type(value).__name__}>"',
        "peer values are JSON: every JSON type is described above this line",
    ),
)
