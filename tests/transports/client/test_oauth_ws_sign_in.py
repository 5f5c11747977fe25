"""A person's sign-in over WebSocket is not cut off by the connect timeout: the 401 to
the upgrade runs the flow between two tries of the upgrade, each try bound by
``connect_timeout`` alone (``WsLink.start``).  On real sockets with the real OpenID provider
(``test_ws_auth.py``'s server), both loops."""

from __future__ import annotations

import anyio
import pytest
from mrtr_transports.client.oauth import OAuthProvider
from mrtr_transports.client.ws import open_ws_client
from support.oidc_provider import PUBLIC_CLIENT_ID, oidc_provider
from test_ws_auth import REDIRECT_URI, protected_server

pytestmark = pytest.mark.anyio

CONNECT_TIMEOUT = 0.5
#: How long the person takes: well past the connect timeout.
SIGNING_IN = 4 * CONNECT_TIMEOUT


async def test_a_sign_in_longer_than_the_connect_timeout_completes() -> None:
    async with oidc_provider() as provider, protected_server(provider) as url:
        shown: list[str] = []

        async def slow_person(authorization_url: str) -> str:
            shown.append(authorization_url)
            await anyio.sleep(SIGNING_IN)
            return (await provider.browser().authorize(authorization_url, user="ada")).url

        auth = OAuthProvider(
            url,
            user_agent=slow_person,
            redirect_uri=REDIRECT_URI,
            client_id=PUBLIC_CLIENT_ID,
            issuer=provider.issuer,
        )
        started = anyio.current_time()
        async with open_ws_client(url, auth=auth, connect_timeout=CONNECT_TIMEOUT) as client:
            result = await client.call_tool("whoami", {})
        assert anyio.current_time() - started >= SIGNING_IN
        assert '"sub": "ada"' in result["content"][0]["text"]
        assert len(shown) == 1 and auth.authorizations == 1
