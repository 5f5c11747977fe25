// The TypeScript SDK v2 (@modelcontextprotocol/server 2.4.0) peer of benchmarks/bench_http.py:
// the same two tools as bench_mrtr_app.py and bench_mcp_peer.py, served over Streamable HTTP.
//
//   node benchmarks/ts/http_server.mjs    createMcpHandler (JSON responses) wrapped in node:http
//                                         on 127.0.0.1, port 0; prints "PORT <n>" on stdout
//
// `greet` answers input_required with one form elicitation under `name` and a requestState
// sealed by createRequestStateCodec (HMAC-SHA256, bound to the method; verified before the
// handler runs, as ours is); the retry gets "Hello Ada".  `plain` is one leg: "done".
// The SDK is the one installed for the interop tests (make node-peers), imported by path.

import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { Readable } from 'node:stream';

const sdk = new URL('../../tests/support/ts/node_modules/@modelcontextprotocol/server/dist/index.mjs', import.meta.url);
const { McpServer, acceptedContent, createMcpHandler, createRequestStateCodec, inputRequired } = await import(sdk);

const codec = createRequestStateCodec({ key: randomBytes(32), bind: ctx => ctx.mcpReq.method });
const NAME = { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] };
const text = value => ({ content: [{ type: 'text', text: value }] });

function build() {
    const server = new McpServer(
        { name: 'bench-ts', version: '1.0' },
        { capabilities: { tools: {} }, requestState: { verify: codec.verify } }
    );
    server.registerTool('greet', { description: 'Asks for a name, then greets it' }, async ctx => {
        const answer = acceptedContent(ctx.mcpReq.inputResponses, 'name');
        if (!answer) {
            const name = inputRequired.elicit({ message: 'What is your name?', requestedSchema: NAME });
            return inputRequired({ inputRequests: { name }, requestState: await codec.mint({ asked: 'name' }, ctx) });
        }
        return text(`Hello ${answer.name}`);
    });
    server.registerTool('plain', { description: 'One leg, no input' }, async () => text('done'));
    return server;
}

const handler = createMcpHandler(() => build(), { responseMode: 'json' });
const http = createServer(async (req, res) => {
    try {
        const body = req.method === 'GET' || req.method === 'HEAD' ? undefined : Readable.toWeb(req);
        const request = new Request(`http://${req.headers.host}${req.url}`, {
            method: req.method,
            headers: Object.entries(req.headers).flatMap(([name, value]) =>
                Array.isArray(value) ? value.map(one => [name, one]) : [[name, value]]
            ),
            body,
            duplex: 'half'
        });
        const response = await handler.fetch(request);
        const payload = response.body ? Buffer.from(await response.arrayBuffer()) : undefined;
        const headers = [...response.headers].flat();
        if (payload) headers.push('content-length', String(payload.length));
        res.writeHead(response.status, headers);
        res.end(payload);
    } catch (error) {
        if (!res.headersSent) res.writeHead(500);
        res.end(String(error));
    }
});
http.keepAliveTimeout = 60000;
http.listen(0, '127.0.0.1', () => {
    process.stdout.write(`PORT ${http.address().port}\n`);
});
