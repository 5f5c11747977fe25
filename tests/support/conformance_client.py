"""The client the MCP conformance suite runs as ``python tests/support/conformance_client.py URL``.

The model: the suite's client leg starts a mock server for one scenario and
runs ``<command> <url>``, naming the scenario in ``MCP_CONFORMANCE_SCENARIO``
and, for some scenarios, the tool calls to make in ``MCP_CONFORMANCE_CONTEXT``
(JSON: ``{"name": ..., "toolCalls": [{"name", "arguments"}, ...]}``).  The
mock server records what arrives and judges it.  This entry does what each
scenario needs with the project's own Streamable HTTP client
(:func:`~mrtr_transports.client.http.open_http_client`): all protocol behaviour
(the ``_meta`` of every request, the standard and ``Mcp-Param-*`` headers, the
requestState echo, fresh ids per leg) is the client's, none is special-cased
here.  The scenarios:

``sep-2322-client-request-state``
    Calls ``test_mrtr_echo_state`` and, while its first round waits for an
    answer, ``test_mrtr_unrelated`` (no state may leak into it); then
    ``test_mrtr_no_state`` and ``test_mrtr_no_result_type``.
``request-metadata``
    A few requests; the mock rejects the very first one with -32022 naming the
    version we sent, and the connection retries it once (the core's rule).
``http-standard-headers``
    Every listed tool, resource and prompt is called, read and got once.
``http-custom-headers``, ``tools_call`` and any scenario with ``toolCalls``
    Lists the tools, then makes the context's calls (or calls each listed tool
    with placeholder arguments built from its input schema).
``http-invalid-tool-headers``
    Lists the tools (the client drops those with invalid ``x-mcp-header``
    annotations) and calls each tool that is left.
``json-schema-ref-no-deref``
    Lists the tools and fetches nothing a ``$ref`` points at.
``json-schema-2020-12-preservation``
    Echoes the focal tool's input schema back, untouched, through
    ``json_schema_echo``.
``auth/*``
    The same tool calls through an OAuth provider
    (:class:`~mrtr_transports.client.oauth.OAuthProvider`): its headless user agent
    fetches the authorization URL and reads the redirect (the mock authorization
    server asks no one); the context's ``client_id``/``client_secret`` are
    pre-registered credentials, and the client offers a Client ID Metadata Document
    URL where the server takes one; ``auth/client-credentials-*`` run it as a machine
    client (the context's secret, or its ``private_key_pem`` for a signed JWT);
    the provider asks for DPoP-bound tokens where the server offers them
    (``auth/dpop*``); ``auth/wif-jwt-bearer`` presents the context's workload JWT
    in the JWT-bearer grant, ``auth/enterprise-managed-authorization`` exchanges
    its ID token at its identity provider for an ID-JAG and presents that.
    A scenario that expects a refusal (a resource
    or issuer mismatch, a bad ``iss``) ends with exit status 1, as the suite allows.

Exit status 0 when every step succeeded; otherwise 1 with the reason on stderr.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import trio
from mrtr_transports.client.errors import ClientError
from mrtr_transports.client.http import open_http_client
from mrtr_transports.client.oauth import (
    AssertionSource,
    OAuthProvider,
    enterprise_identity,
    headless_user_agent,
    workload_identity,
)

import mrtr_core as m

CLIENT_INFO = {"name": "mrtr-conformance-client", "version": "0.1.0"}
#: Everything the scripted answers below can answer.
ALL_CAPABILITIES: Mapping[str, Any] = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {},
    "roots": {},
}
#: The whole run's budget: well under the suite's own 30 s limit per scenario.
RUN_TIMEOUT = 20.0

Scenario = Callable[[str, Mapping[str, Any]], Awaitable[None]]


async def scripted_answer(key: str, request: m.wire.InputRequest) -> m.wire.InputResponse:
    """Canned answers: accept forms with the schema's defaults (booleans true), consent
    to URLs, a fixed sampling reply, no roots."""
    if isinstance(request, m.wire.ElicitFormRequest):
        return m.wire.ElicitResult(action="accept", content=form_content(request.requested_schema))
    if isinstance(request, m.wire.ElicitUrlRequest):
        return m.wire.ElicitResult(action="accept")
    if isinstance(request, m.wire.CreateMessageRequest):
        return m.wire.CreateMessageResult(
            role="assistant",
            content={"type": "text", "text": "conformance reply"},
            model="mrtr-conformance",
            stop_reason="endTurn",
        )
    return m.wire.ListRootsResult(roots=[])


def placeholder(schema: Any) -> Any:
    """A value of the schema's type (its default when it has one)."""
    if not isinstance(schema, Mapping):
        return "test"
    if "default" in schema:
        return schema["default"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    return {
        "string": "test",
        "integer": 1,
        "number": 1.5,
        "boolean": True,
        "object": {},
        "array": [],
        "null": None,
    }.get(kind if isinstance(kind, str) else "string", "test")


def form_content(schema: Mapping[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return {}
    return {name: placeholder(prop) for name, prop in properties.items()}


def arguments_for(tool: Mapping[str, Any]) -> dict[str, Any]:
    """Placeholder arguments for a tool's required properties."""
    schema = tool.get("inputSchema")
    if not isinstance(schema, Mapping):
        return {}
    properties = schema.get("properties")
    required = schema.get("required")
    if not isinstance(properties, Mapping) or not isinstance(required, list):
        return {}
    return {name: placeholder(properties.get(name)) for name in required}


def open_client(url: str, **options: Any) -> Any:
    return open_http_client(
        url,
        answer=scripted_answer,
        capabilities=options.pop("capabilities", ALL_CAPABILITIES),
        info=CLIENT_INFO,
        **options,
    )


# --- The scenarios --------------------------------------------------------------------------


async def request_state(url: str, context: Mapping[str, Any]) -> None:
    round_waiting = trio.Event()
    unrelated_done = trio.Event()

    async def answer(key: str, request: m.wire.InputRequest) -> m.wire.InputResponse:
        # Hold the first round open until the unrelated call has been made beside it.
        round_waiting.set()
        await unrelated_done.wait()
        return await scripted_answer(key, request)

    async with open_http_client(
        url, answer=answer, capabilities={"elicitation": {"form": {}}}, info=CLIENT_INFO
    ) as client:
        await client.list_tools()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.call_tool, "test_mrtr_echo_state", {})
            await round_waiting.wait()
            await client.call_tool("test_mrtr_unrelated", {})
            unrelated_done.set()
        await client.call_tool("test_mrtr_no_state", {})
        result = await client.call_tool("test_mrtr_no_result_type", {})
        if result.get("resultType", "complete") != "complete":
            raise AssertionError(f"unexpected result {result!r}")


async def request_metadata(url: str, context: Mapping[str, Any]) -> None:
    async with open_client(url) as client:
        await client.list_tools()
        await client.call_tool("test_tool", {})


async def standard_headers(url: str, context: Mapping[str, Any]) -> None:
    async with open_client(url) as client:
        for tool in await client.list_tools():
            await client.call_tool(tool["name"], arguments_for(tool))
        resources = await client.request("resources/list")
        for resource in resources.get("resources", []):
            await client.call("resources/read", {"uri": resource["uri"]})
        prompts = await client.request("prompts/list")
        for prompt in prompts.get("prompts", []):
            await client.call("prompts/get", {"name": prompt["name"]})


async def tool_calls(url: str, context: Mapping[str, Any]) -> None:
    """The context's tool calls, or each listed tool once (the client drops invalid ones)."""
    async with open_client(url) as client:
        tools = await client.list_tools()
        calls: Sequence[Mapping[str, Any]] = context.get("toolCalls") or [
            {"name": tool["name"], "arguments": arguments_for(tool)} for tool in tools
        ]
        for call in calls:
            await client.call_tool(call["name"], call.get("arguments") or {})


async def list_only(url: str, context: Mapping[str, Any]) -> None:
    async with open_client(url) as client:
        await client.list_tools()


async def schema_preservation(url: str, context: Mapping[str, Any]) -> None:
    async with open_client(url) as client:
        tools = {tool["name"]: tool for tool in await client.list_tools()}
        focal = tools["json_schema_2020_12_tool"]
        await client.call_tool("json_schema_echo", {"schema": focal["inputSchema"]})


#: Where the mock authorization server sends the headless user agent back (never fetched).
REDIRECT_URI = "http://localhost:3000/callback"
#: The Client ID Metadata Document URL the suite's ``auth/basic-cimd`` expects.
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"


def scenario_name() -> str:
    return os.environ.get("MCP_CONFORMANCE_SCENARIO", "")


def assertion_source(context: Mapping[str, Any]) -> AssertionSource | None:
    """The JWT-bearer grant's source the scenario asks for (see the docstring)."""
    scenario = scenario_name()
    if scenario == "auth/wif-jwt-bearer":
        return workload_identity(context["valid_jwt"])
    if scenario == "auth/enterprise-managed-authorization":
        return enterprise_identity(
            token_endpoint=context["idp_token_endpoint"],
            id_token=context["idp_id_token"],
            client_id=context["idp_client_id"],
        )
    return None


async def authorized_calls(url: str, context: Mapping[str, Any]) -> None:
    """List the tools and call each through an OAuth provider (see the docstring)."""
    auth = OAuthProvider(
        url,
        user_agent=headless_user_agent,
        redirect_uri=REDIRECT_URI,
        client_id=context.get("client_id"),
        client_secret=context.get("client_secret"),
        issuer=context.get("issuer"),
        client_metadata_url=CLIENT_METADATA_URL,
        client_name=CLIENT_INFO["name"],
        client_credentials=scenario_name().startswith("auth/client-credentials-"),
        private_key_pem=context.get("private_key_pem"),
        signing_algorithm=context.get("signing_algorithm", "ES256"),
        dpop=True,  # (DPoP-bound tokens where the authorization server offers them)
        jwt_bearer=assertion_source(context),
    )
    async with open_client(url, auth=auth) as client:
        for tool in await client.list_tools():
            await client.call_tool(tool["name"], arguments_for(tool))


SCENARIOS: Mapping[str, Scenario] = {
    "sep-2322-client-request-state": request_state,
    "request-metadata": request_metadata,
    "http-standard-headers": standard_headers,
    "http-custom-headers": tool_calls,
    "http-invalid-tool-headers": tool_calls,
    "tools_call": tool_calls,
    "json-schema-ref-no-deref": list_only,
    "json-schema-2020-12-preservation": schema_preservation,
}


async def run(url: str, scenario: str, context: Mapping[str, Any]) -> None:
    with trio.fail_after(RUN_TIMEOUT):
        default = authorized_calls if scenario.startswith("auth/") else tool_calls
        await SCENARIOS.get(scenario, default)(url, context)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        sys.stderr.write("usage: python tests/support/conformance_client.py URL\n")
        return 2
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    try:
        context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    except ValueError as exc:
        sys.stderr.write(f"MCP_CONFORMANCE_CONTEXT is not JSON: {exc}\n")
        return 2
    failures: list[BaseException] = []
    try:
        trio.run(run, args[0], scenario, context if isinstance(context, dict) else {})
    except* (ClientError, trio.TooSlowError, AssertionError, KeyError) as group:
        failures.extend(group.exceptions)
    for failure in failures:
        sys.stderr.write(f"conformance client ({scenario}): {type(failure).__name__}: {failure}\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
