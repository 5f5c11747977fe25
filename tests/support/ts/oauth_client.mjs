// An OAuth client on the official TypeScript SDK v2 (@modelcontextprotocol/client 2.4.0):
// the SDK's own flow (discovery from the 401, the authorization server's metadata, dynamic
// registration or a pre-registered client id, PKCE, `resource`, the token request, the
// step-up on 403 insufficient_scope) against an MCP server that requires tokens
// (tests/transports/auth/test_sdk_clients_auth.py).
//
//   node oauth_client.mjs URL REDIRECT_URI CLIENT_ID|- TOOL[=JSON_ARGUMENTS]...
//
// CLIENT_ID `-` registers dynamically.  The person's browser is the test: each time the SDK
// redirects, this prints {"step": "authorize", "url"} and reads one line on stdin, the URL the
// authorization server sent the browser back to; it hands its parameters to finishAuth and
// goes on (a new transport for a connection that failed, the same call again for a call).
// Then {"step": "call", "name", "text"} per tool, {"step": "done"}.  Tokens are never printed.

import * as readline from 'node:readline';

import { Client, StreamableHTTPClientTransport, UnauthorizedError } from '@modelcontextprotocol/client';

const [url, redirectUri, clientId, ...tools] = process.argv.slice(2);
if (!url || !redirectUri || !clientId) {
    process.stderr.write('usage: oauth_client.mjs URL REDIRECT_URI CLIENT_ID|- TOOL[=JSON]...\n');
    process.exit(2);
}

const emit = record => process.stdout.write(JSON.stringify(record) + '\n');
const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();

// The SDK's OAuthClientProvider, in memory.
class Provider {
    constructor() {
        this.client = clientId === '-' ? undefined : { client_id: clientId };
        this.pending = undefined; // the redirect the browser came back with, not yet used
    }
    get redirectUrl() {
        return redirectUri;
    }
    get clientMetadata() {
        return {
            client_name: 'the official TypeScript SDK',
            redirect_uris: [redirectUri],
            grant_types: ['authorization_code', 'refresh_token'],
            response_types: ['code'],
            token_endpoint_auth_method: 'none'
        };
    }
    clientInformation() {
        return this.client;
    }
    saveClientInformation(information) {
        this.client = information;
    }
    tokens() {
        return this.saved;
    }
    saveTokens(tokens) {
        this.saved = tokens;
    }
    async redirectToAuthorization(authorizationUrl) {
        emit({ step: 'authorize', url: authorizationUrl.href });
        const { value, done } = await lines.next();
        if (done) throw new Error('no redirect on stdin');
        this.pending = new URL(value.trim()).searchParams;
    }
    saveCodeVerifier(verifier) {
        this.verifier = verifier;
    }
    codeVerifier() {
        return this.verifier;
    }
    saveDiscoveryState(state) {
        this.discovery = state;
    }
    discoveryState() {
        return this.discovery;
    }
}

const provider = new Provider();
const newTransport = () => new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
let transport = newTransport();

// `action` again once the browser came back, as an app does after its redirect
// (UnauthorizedError: the SDK redirected; finishAuth redeems the code).
async function authorized(action, again = action) {
    for (let attempt = 0; ; attempt++) {
        try {
            return await (attempt === 0 ? action() : again());
        } catch (error) {
            if (!(error instanceof UnauthorizedError) || provider.pending === undefined || attempt >= 3) {
                throw error;
            }
            const params = provider.pending;
            provider.pending = undefined;
            await transport.finishAuth(params);
        }
    }
}

const client = new Client(
    { name: 'ts-oauth-client', version: '2.4.0-peer' },
    { capabilities: {}, versionNegotiation: { mode: { pin: '2026-07-28' } } }
);
await authorized(
    () => client.connect(transport),
    () => {
        // a connection that failed is not started again: a new transport, the same provider
        transport = newTransport();
        return client.connect(transport);
    }
);
for (const tool of tools) {
    const [name, json] = tool.split(/=(.*)/s);
    const result = await authorized(() => client.callTool({ name, arguments: json ? JSON.parse(json) : {} }));
    if (result.isError) throw new Error(`${name}: ${JSON.stringify(result.content)}`);
    emit({ step: 'call', name, text: result.content[0].text });
}
await client.close();
emit({ step: 'done' });
process.exit(0);
