"""Where the OAuth client keeps what it got: tokens and client registrations, each
under a key that names the resource and the authorization server (a token or a
``client_id`` of one authorization server is never presented to another).

:class:`MemoryTokenStore` is the default; :class:`FileTokenStore` keeps them in one
JSON file written with owner-only permissions (0600, replaced atomically), for a
command-line client that runs again later (``mrtr call``).  A store is any object
with the four methods of :class:`TokenStore` (what the provider uses).  Both stores
here also answer what they hold (``entries()``) and drop some of it (``forget()``,
``clear()``): synchronous, for a command that inspects the store (``mrtr auth``); no
secret is needed to list, but an entry's tokens are there for its caller to keep
to itself.

A DPoP-bound token (RFC 9449) is kept with the key it is bound to, in the same entry:
the file holds the private key as a JWK beside the token, in the one 0600 file written
whole and atomically, so a token and its key are saved, replaced and forgotten
together and no later process meets one without the other.  ``entries()`` does not
show the keys; ``dpop_key()`` gives one back (``None`` where none, or none readable,
is kept: the provider then treats the token as no token).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import anyio

from mrtr_core.auth import ClientCredentials, Tokens

from .dpop import DpopKey

__all__ = ["FileTokenStore", "MemoryTokenStore", "StoredEntries", "TokenStore"]


class TokenStore(Protocol):
    """What the provider uses.  ``dpop_key`` and the ``dpop_key=`` of ``save_tokens``
    are asked of a store only for DPoP-bound tokens (a Bearer-only store may lack them)."""

    async def tokens(self, resource: str, issuer: str) -> Tokens | None: ...
    async def save_tokens(
        self, resource: str, issuer: str, tokens: Tokens | None, *, dpop_key: DpopKey | None = None
    ) -> None: ...
    async def dpop_key(self, resource: str, issuer: str) -> DpopKey | None: ...
    async def client(self, issuer: str) -> ClientCredentials | None: ...
    async def save_client(self, issuer: str, client: ClientCredentials) -> None: ...


class StoredEntries(NamedTuple):
    """What a store holds: ``tokens`` by ``(resource, issuer)``, client registrations
    (``clients``) by issuer."""

    tokens: dict[tuple[str, str], Tokens]
    clients: dict[str, ClientCredentials]


#: Which tokens ``forget`` drops: a test of their ``(resource, issuer)``.
Which = Callable[[str, str], bool]


class MemoryTokenStore:
    """Tokens and registrations for the life of the process."""

    def __init__(self) -> None:
        self._tokens: dict[tuple[str, str], Tokens] = {}
        self._keys: dict[tuple[str, str], DpopKey] = {}
        self._clients: dict[str, ClientCredentials] = {}

    def __repr__(self) -> str:
        return f"MemoryTokenStore({len(self._tokens)} tokens)"

    async def tokens(self, resource: str, issuer: str) -> Tokens | None:
        return self._tokens.get((resource, issuer))

    async def save_tokens(
        self, resource: str, issuer: str, tokens: Tokens | None, *, dpop_key: DpopKey | None = None
    ) -> None:
        key = (resource, issuer)
        self._keys.pop(key, None)
        if tokens is None:
            self._tokens.pop(key, None)
            return
        self._tokens[key] = tokens
        if dpop_key is not None:
            self._keys[key] = dpop_key

    async def dpop_key(self, resource: str, issuer: str) -> DpopKey | None:
        return self._keys.get((resource, issuer))

    async def client(self, issuer: str) -> ClientCredentials | None:
        return self._clients.get(issuer)

    async def save_client(self, issuer: str, client: ClientCredentials) -> None:
        self._clients[issuer] = client

    def entries(self) -> StoredEntries:
        """A copy of what the store holds."""
        return StoredEntries(dict(self._tokens), dict(self._clients))

    def forget(self, which: Which) -> int:
        """Drop the tokens whose ``(resource, issuer)`` ``which`` accepts; how many."""
        dropped = [key for key in self._tokens if which(*key)]
        for key in dropped:
            del self._tokens[key]
            self._keys.pop(key, None)
        return len(dropped)

    def clear(self) -> None:
        """Drop every token (with its key) and registration."""
        self._tokens.clear()
        self._keys.clear()
        self._clients.clear()


def _tokens_json(tokens: Tokens, dpop_key: DpopKey | None) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "access_token": tokens.access_token,
        "token_type": tokens.token_type,
        "expires_at": tokens.expires_at,
        "refresh_token": tokens.refresh_token,
        "scopes": None if tokens.scopes is None else list(tokens.scopes),
    }
    if dpop_key is not None:
        raw["dpop_key"] = dpop_key.private_jwk()
    return raw


def _dpop_key_from(raw: Any) -> DpopKey | None:
    """The key kept in a token's entry, or None (none kept, or none readable)."""
    jwk = raw.get("dpop_key") if isinstance(raw, dict) else None
    if not isinstance(jwk, dict):
        return None
    try:
        return DpopKey.from_private_jwk(jwk)
    except ValueError:
        return None


def _client_json(client: ClientCredentials) -> dict[str, Any]:
    return {
        "client_id": client.client_id,
        "client_secret": client.client_secret,
        "token_endpoint_auth_method": client.token_endpoint_auth_method,
    }


def _client_from(raw: dict[str, Any]) -> ClientCredentials:
    return ClientCredentials(
        client_id=raw["client_id"],
        client_secret=raw.get("client_secret"),
        token_endpoint_auth_method=raw.get("token_endpoint_auth_method"),
    )


def _tokens_from(raw: dict[str, Any]) -> Tokens:
    scopes = raw.get("scopes")
    return Tokens(
        access_token=raw["access_token"],
        token_type=raw.get("token_type", "Bearer"),
        expires_at=raw.get("expires_at"),
        refresh_token=raw.get("refresh_token"),
        scopes=None if scopes is None else tuple(scopes),
    )


class FileTokenStore:
    """One JSON file, owner-only (0600), rewritten whole through a temporary file of
    the same permissions and an atomic rename.  The wall clock is the tokens' clock
    (their ``expires_at`` outlives the process)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = anyio.Lock()

    def __repr__(self) -> str:
        return f"FileTokenStore({str(self.path)!r})"

    def _read(self) -> dict[str, Any]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {"tokens": {}, "clients": {}}
        if not isinstance(raw, dict):
            raise ValueError(f"{self.path} is not a token store")
        raw.setdefault("tokens", {})
        raw.setdefault("clients", {})
        return raw

    def _write(self, raw: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        temporary = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)  # (an older file of that name keeps its mode otherwise)
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                fd = -1
                json.dump(raw, file)
        finally:
            if fd >= 0:
                os.close(fd)
        os.replace(temporary, self.path)

    @staticmethod
    def _key(resource: str, issuer: str) -> str:
        return json.dumps([resource, issuer])

    @staticmethod
    def _unkey(key: str) -> tuple[str, str]:
        resource, issuer = json.loads(key)
        if not isinstance(resource, str) or not isinstance(issuer, str):
            raise ValueError("a token's key is [resource, issuer]")
        return resource, issuer

    async def tokens(self, resource: str, issuer: str) -> Tokens | None:
        async with self._lock:
            found = self._read()["tokens"].get(self._key(resource, issuer))
        return None if found is None else _tokens_from(found)

    async def save_tokens(
        self, resource: str, issuer: str, tokens: Tokens | None, *, dpop_key: DpopKey | None = None
    ) -> None:
        async with self._lock:
            raw = self._read()
            if tokens is None:
                raw["tokens"].pop(self._key(resource, issuer), None)
            else:
                raw["tokens"][self._key(resource, issuer)] = _tokens_json(tokens, dpop_key)
            self._write(raw)

    async def dpop_key(self, resource: str, issuer: str) -> DpopKey | None:
        async with self._lock:
            found = self._read()["tokens"].get(self._key(resource, issuer))
        return _dpop_key_from(found)

    async def client(self, issuer: str) -> ClientCredentials | None:
        async with self._lock:
            found = self._read()["clients"].get(issuer)
        return None if found is None else _client_from(found)

    async def save_client(self, issuer: str, client: ClientCredentials) -> None:
        async with self._lock:
            raw = self._read()
            raw["clients"][issuer] = _client_json(client)
            self._write(raw)

    # --- For a command that inspects the store (synchronous: one read, one rewrite) ---

    def entries(self) -> StoredEntries:
        """What the file holds (empty when there is no file); ``OSError`` when it cannot
        be read, ``ValueError`` when it is not a token store."""
        raw = self._read()
        try:
            tokens = {self._unkey(key): _tokens_from(found) for key, found in raw["tokens"].items()}
            clients = {issuer: _client_from(found) for issuer, found in raw["clients"].items()}
        except (KeyError, TypeError, AttributeError, ValueError):
            raise ValueError(f"{self.path} is not a token store") from None
        return StoredEntries(tokens, clients)

    def forget(self, which: Which) -> int:
        """Drop the tokens (each with its DPoP key) whose ``(resource, issuer)``
        ``which`` accepts (the file rewritten only when one is); how many."""
        self.entries()  # (a file that is no token store is refused, not rewritten)
        raw = self._read()
        dropped = [key for key in raw["tokens"] if which(*self._unkey(key))]
        for key in dropped:
            del raw["tokens"][key]
        if dropped:
            self._write(raw)
        return len(dropped)

    def clear(self) -> None:
        """Drop every token and registration (an empty store written)."""
        self._write({"tokens": {}, "clients": {}})
