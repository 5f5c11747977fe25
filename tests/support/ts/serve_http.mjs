// A fetch-style MCP handler (createMcpHandler of the TypeScript SDK) served by node:http on
// 127.0.0.1, port 0; once listening it prints "URL http://127.0.0.1:<port>/mcp" on stdout.
// Shared by the interop peer (peer_server.mjs) and the benchmark's TS side
// (benchmarks/ts/bench_server.mjs).
//
//   serveHttp(handler, { keepAliveTimeout, backlog })   both optional (Node's defaults)

import { createServer } from 'node:http';
import { Readable } from 'node:stream';

export function serveHttp(handler, { keepAliveTimeout, backlog } = {}) {
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
            res.writeHead(response.status, [...response.headers].flat());
            if (response.body) {
                for await (const chunk of response.body) res.write(chunk);
            }
            res.end();
        } catch (error) {
            if (!res.headersSent) res.writeHead(500);
            res.end(String(error));
        }
    });
    if (keepAliveTimeout !== undefined) http.keepAliveTimeout = keepAliveTimeout;
    http.listen({ port: 0, host: '127.0.0.1', backlog }, () => {
        process.stdout.write(`URL http://127.0.0.1:${http.address().port}/mcp\n`);
    });
    return http;
}
