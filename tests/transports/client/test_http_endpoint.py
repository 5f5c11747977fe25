"""``Endpoint``: what the HTTP client reads from its URL once (``client/http_endpoint.py``),
all the 2025 session knows of the link's address."""

from __future__ import annotations

import pytest
from mrtr_transports.client.http import HttpLink
from mrtr_transports.client.http_endpoint import Endpoint


def test_the_host_header_drops_credentials_and_the_target_keeps_the_query() -> None:
    endpoint = Endpoint.parse("https://user:secret@example.com:8443/a/mcp?tenant=1")
    assert endpoint.https and endpoint.host == "example.com" and endpoint.port == 8443
    assert endpoint.authority == "example.com:8443"
    assert endpoint.target == "/a/mcp?tenant=1"


def test_default_ports_and_path() -> None:
    assert (Endpoint.parse("http://h").port, Endpoint.parse("http://h").target) == (80, "/")
    assert Endpoint.parse("https://h/x").port == 443


def test_extra_headers_keep_their_order_either_way_they_are_given() -> None:
    pairs = [("Authorization", "Bearer t"), ("X-Trace", "1")]
    assert Endpoint.parse("http://h/", pairs).extra_headers == tuple(pairs)
    assert Endpoint.parse("http://h/", dict(pairs)).extra_headers == tuple(pairs)
    assert Endpoint.parse("http://h/").extra_headers == ()


@pytest.mark.parametrize("url", ["ftp://h/mcp", "http:///mcp", "example.com/mcp"])
def test_not_an_http_url(url: str) -> None:
    with pytest.raises(ValueError, match="not an http"):
        Endpoint.parse(url)
    with pytest.raises(ValueError, match="not an http"):
        HttpLink(url)


def test_the_link_shows_its_endpoint() -> None:
    link = HttpLink("http://127.0.0.1:9/mcp", headers={"Authorization": "x"}, connect_timeout=3)
    assert link.url == "http://127.0.0.1:9/mcp" and link.connect_timeout == 3
    assert link.extra_headers == (("Authorization", "x"),)
    assert link.endpoint == Endpoint.parse(link.url, {"Authorization": "x"}, 3)
