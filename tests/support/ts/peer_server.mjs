// A server built on the official TypeScript SDK v2 (@modelcontextprotocol/server 2.4.0):
// the peer our client must work with (tests/transports/interop/test_interop_ts_server.py).
//
//   node peer_server.mjs stdio   serves on stdin/stdout (serveStdio: one era per connection,
//                                2026-07-28 after server/discover, 2025 after initialize)
//   node peer_server.mjs http    createMcpHandler wrapped in node:http on 127.0.0.1, port 0;
//                                prints "URL http://127.0.0.1:<port>/mcp" on stdout
//
// Every handler is written once for both eras: it returns inputRequired(...) and reads
// ctx.mcpReq.inputResponses on the retry.  On 2026-07-28 the client fulfils the rounds; on a
// 2025 connection the SDK's legacy shim turns them into real server-to-client requests.
// Every requestState is sealed by createRequestStateCodec (HMAC-SHA256, bound to the method)
// and verified before the handler runs: a state changed by one byte is refused with -32602.

import { randomBytes } from 'node:crypto';

import {
    McpServer,
    acceptedContent,
    createMcpHandler,
    createRequestStateCodec,
    fromJsonSchema,
    inputRequired,
    inputResponse
} from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';

import { serveHttp } from './serve_http.mjs';

const codec = createRequestStateCodec({ key: randomBytes(32), bind: ctx => ctx.mcpReq.method });

const NAME = { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] };
const askName = message => inputRequired.elicit({ message, requestedSchema: NAME });
const askLlm = text =>
    inputRequired.createMessage({
        messages: [{ role: 'user', content: { type: 'text', text } }],
        maxTokens: 50
    });
const text = value => ({ content: [{ type: 'text', text: value }] });

function sampled(responses, key) {
    const view = inputResponse(responses, key);
    if (view.kind !== 'sampling') return undefined;
    const content = view.result.content;
    return content && content.type === 'text' ? content.text : '?';
}

function rootUris(responses, key) {
    const view = inputResponse(responses, key);
    return view.kind === 'roots' ? view.roots.map(root => root.uri) : undefined;
}

// Seal `payload` and ask `inputRequests` with it (either may be absent, never both).
async function ask(ctx, inputRequests, payload) {
    const spec = {};
    if (inputRequests) spec.inputRequests = inputRequests;
    if (payload !== undefined) spec.requestState = await codec.mint(payload, ctx);
    return inputRequired(spec);
}

function build() {
    const server = new McpServer(
        { name: 'peer-ts-server', version: '2.4.0-peer' },
        {
            capabilities: { tools: {}, prompts: {}, resources: {} },
            requestState: { verify: codec.verify }
        }
    );

    server.registerTool('greet', { description: 'Asks a name (form elicitation), then greets.' }, async ctx => {
        const answer = acceptedContent(ctx.mcpReq.inputResponses, 'name');
        if (!answer) return ask(ctx, { name: askName('What is your name?') });
        return text(`Hello, ${answer.name}!`);
    });

    server.registerTool('ask_llm', { description: "Samples the client's LLM." }, async ctx => {
        const said = sampled(ctx.mcpReq.inputResponses, 'llm');
        if (said === undefined) return ask(ctx, { llm: askLlm('Say something') });
        return text(`llm said: ${said}`);
    });

    server.registerTool('list_roots', { description: "Lists the client's roots." }, async ctx => {
        const uris = rootUris(ctx.mcpReq.inputResponses, 'where');
        if (uris === undefined) return ask(ctx, { where: inputRequired.listRoots() });
        return text(`roots: ${uris.join(',')}`);
    });

    // URL-mode elicitation: the user is sent to a page; the answer says whether they went.
    server.registerTool('sign_in', { description: 'Asks the user to open a sign-in page.' }, async ctx => {
        const view = inputResponse(ctx.mcpReq.inputResponses, 'login');
        if (view.kind !== 'elicit') {
            const login = inputRequired.elicitUrl({ message: 'Sign in to the peer', url: 'https://peer.example/login?x=1' });
            return ask(ctx, { login }, { asked: 'login' });
        }
        return text(`sign-in ${view.action}`);
    });

    // Three rounds; the sealed state carries what earlier rounds learnt and counts the rounds.
    server.registerTool('three_rounds', { description: 'A name, then the LLM, then the roots.' }, async ctx => {
        const state = ctx.mcpReq.requestState() ?? { round: 0 };
        const responses = ctx.mcpReq.inputResponses;
        if (state.name === undefined) {
            const answer = acceptedContent(responses, 'name');
            if (!answer) return ask(ctx, { name: askName('What is your name?') }, { round: 1 });
            return ask(ctx, { llm: askLlm(`Greet ${answer.name}`) }, { round: 2, name: answer.name });
        }
        if (state.llm === undefined) {
            const said = sampled(responses, 'llm');
            if (said === undefined) return ask(ctx, { llm: askLlm(`Greet ${state.name}`) }, state);
            return ask(ctx, { where: inputRequired.listRoots() }, { ...state, round: 3, llm: said });
        }
        const uris = rootUris(responses, 'where');
        if (uris === undefined) return ask(ctx, { where: inputRequired.listRoots() }, state);
        return text(`name=${state.name} llm=${state.llm} roots=${uris.join(',')} rounds=${state.round}`);
    });

    // Three questions in one round; a declined form is an answer too.
    server.registerTool('all_at_once', { description: 'A name, the LLM and the roots in one round.' }, async ctx => {
        const responses = ctx.mcpReq.inputResponses;
        const name = inputResponse(responses, 'name');
        const said = sampled(responses, 'llm');
        const uris = rootUris(responses, 'where');
        if (name.kind !== 'elicit' || said === undefined || uris === undefined) {
            const asks = { name: askName('What is your name?'), llm: askLlm('hi'), where: inputRequired.listRoots() };
            return ask(ctx, asks, { asked: 'all' });
        }
        const who = name.action === 'accept' ? name.content?.name : name.action;
        return text(`name=${who} llm=${said} roots=${uris.length}`);
    });

    // Load shedding: `legs` rounds that carry only a (sealed) requestState.
    const LEGS = fromJsonSchema({ type: 'object', properties: { legs: { type: 'integer', minimum: 0, maximum: 8 } } });
    server.registerTool('state_only', { description: 'requestState-only rounds.', inputSchema: LEGS }, async (args, ctx) => {
        const legs = args.legs ?? 2;
        const seen = ctx.mcpReq.requestState()?.seen ?? 0;
        if (seen < legs) return ask(ctx, undefined, { seen: seen + 1 });
        return text(`state-only legs=${seen}`);
    });

    const AB = fromJsonSchema({
        type: 'object',
        properties: { a: { type: 'number' }, b: { type: 'number' } },
        required: ['a', 'b']
    });
    server.registerTool('add', { description: 'Adds two numbers.', inputSchema: AB }, async ({ a, b }) => text(String(a + b)));

    server.registerPrompt('haiku', { description: 'Asks whom the haiku is about.' }, async ctx => {
        const answer = acceptedContent(ctx.mcpReq.inputResponses, 'name');
        if (!answer) return ask(ctx, { name: askName('Whom is the haiku about?') });
        return { messages: [{ role: 'user', content: { type: 'text', text: `haiku about ${answer.name}` } }] };
    });

    server.registerResource('secret', 'peer://secret', { mimeType: 'text/plain' }, async (uri, ctx) => {
        const answer = acceptedContent(ctx.mcpReq.inputResponses, 'name');
        if (!answer) return ask(ctx, { name: askName('Who is reading the secret?') });
        return { contents: [{ uri: uri.href, mimeType: 'text/plain', text: `the secret, for ${answer.name}` }] };
    });
    return server;
}

const mode = process.argv[2];
if (mode === 'stdio') {
    serveStdio(() => build());
} else if (mode === 'http') {
    const handler = createMcpHandler(() => build(), { responseMode: process.argv[3] ?? 'auto' });
    serveHttp(handler);
} else {
    process.stderr.write('usage: peer_server.mjs stdio|http [auto|json|sse]\n');
    process.exit(2);
}
