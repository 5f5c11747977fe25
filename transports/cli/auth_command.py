"""``mrtr auth list`` and ``mrtr auth forget``: what the token store holds, never a secret.

The model: ``mrtr call`` keeps the tokens it got, per resource and authorization
server, and the client registrations, per authorization server, in one owner-only
file (:func:`~.signing_in.default_token_store`, or ``--token-store PATH``).  ``list``
shows each token's resource, issuer, expiry, scopes and whether it can be refreshed,
and each registration's issuer and client id (public by design); no access token,
refresh token or client secret is ever printed.  ``forget URL`` drops the tokens a
command on URL would use (their resource is URL, or a parent of it on the same origin,
the client's own rule; a ``ws(s)://`` URL's are its ``http(s)`` URL's), so the next
command signs in again; ``forget --all`` empties the store, registrations included.
Exit 0, or 2 (usage) for a URL with nothing stored or a store that cannot be read.

The file is :class:`~mrtr_transports.client.oauth.FileTokenStore`'s, read and
rewritten through its ``entries()``, ``forget()`` and ``clear()`` (one home for the
format and its permissions).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from mrtr_core import MrtrError
from mrtr_core.auth import _client as rules
from mrtr_core.auth import canonical_resource

from ..client.oauth import FileTokenStore
from ..client.oauth.store import StoredEntries
from .exit_codes import ExitCode
from .signing_in import default_token_store
from .terminal_text import one_line

__all__ = ["add_auth_arguments", "run_auth"]


def add_auth_arguments(parser: argparse.ArgumentParser, parser_class: Any) -> None:
    """The ``auth`` command's subcommands (``list``, ``forget``)."""
    commands = parser.add_subparsers(
        dest="auth_command", metavar="SUBCOMMAND", parser_class=parser_class
    )
    commands.required = True
    store_help = "the token store (default $XDG_CONFIG_HOME/mrtr/tokens.json or ~/.config/...)"
    listing = commands.add_parser(
        "list",
        help="show the stored tokens (endpoint, issuer, expiry; never a token)",
        description="Show what the token store holds: each token's resource, authorization "
        "server, expiry and scopes, and each client registration. No token or secret is shown.",
    )
    listing.add_argument("--token-store", metavar="PATH", help=store_help)
    forget = commands.add_parser(
        "forget",
        help="forget the tokens stored for an endpoint (or --all)",
        description="Drop the stored tokens of the resource URL names: the next command "
        "signs in again. --all empties the store, client registrations included.",
    )
    forget.add_argument("--token-store", metavar="PATH", help=store_help)
    forget.add_argument("--all", action="store_true", help="forget every token and registration")
    forget.add_argument("url", metavar="URL", nargs="?", help="the endpoint (its resource)")


def run_auth(
    args: argparse.Namespace, *, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """``mrtr auth list`` or ``mrtr auth forget``; the exit code."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    prog = f"mrtr auth {args.auth_command}"
    store = FileTokenStore(Path(args.token_store) if args.token_store else default_token_store())
    try:
        held = store.entries()
    except (OSError, ValueError) as exc:
        err.write(f"{prog}: {store.path}: cannot read it ({one_line(str(exc), 200)})\n")
        return ExitCode.USAGE
    if args.auth_command == "list":
        out.write("\n".join(_listing(held, store.path)) + "\n")
        return ExitCode.RESULT
    if args.all == (args.url is not None):
        err.write(f"{prog}: give one URL, or --all\n")
        return ExitCode.USAGE
    if args.all:
        store.clear()
        out.write("forgot every token and registration\n")
        return ExitCode.RESULT
    if not re.match(r"(?i)(https?|wss?)://[^/\s]", args.url):
        err.write(f"{prog}: {one_line(args.url, 200)} is not an http(s) URL or a ws(s) one\n")
        return ExitCode.USAGE
    endpoint = rules.resource_endpoint(args.url)  # (a WebSocket's tokens: its http URL's)
    wanted = one_line(canonical_resource(endpoint), 200)
    dropped = store.forget(lambda resource, issuer: _used_for(resource, issuer, endpoint))
    if not dropped:
        err.write(f"{prog}: no token stored for {wanted} (mrtr auth list shows what is)\n")
        return ExitCode.USAGE
    out.write(f"forgot {dropped} token(s) of {wanted}\n")
    return ExitCode.RESULT


def _used_for(resource: str, issuer: str, url: str) -> bool:
    """Whether the tokens stored for ``resource`` at ``issuer`` are the ones a command on
    ``url`` uses: their resource is ``url``'s, or a parent of it on the same origin (the
    client's own rule for a server's metadata, ``read_resource_metadata``)."""
    document = {"resource": resource, "authorization_servers": [issuer]}
    try:
        rules.read_resource_metadata(document, endpoint=url)
    except MrtrError:
        return False
    return True


def _listing(held: StoredEntries, path: Path) -> list[str]:
    lines = [f"token store: {path}"]
    if not held.tokens and not held.clients:
        return [*lines, "  (empty)"]
    now = time.time()
    for (resource, issuer), tokens in held.tokens.items():
        expires = tokens.expires_at
        if expires is None:
            when = "no expiry given"
        else:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(expires))
            when = f"expires {stamp}" + (" (expired)" if expires <= now else "")
        facts = [f"issuer {issuer}", when]
        if tokens.scopes:
            facts.append("scopes " + " ".join(tokens.scopes))
        if tokens.dpop_bound:
            facts.append("DPoP-bound")
        if tokens.refresh_token:
            facts.append("refreshable")
        lines.append(one_line(f"{resource}: " + "; ".join(facts)))
    for issuer, client in held.clients.items():
        lines.append(one_line(f"client {client.client_id} registered at {issuer}"))
    return lines
