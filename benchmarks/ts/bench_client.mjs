// The benchmark's TypeScript side, client: the official TypeScript SDK v2
// (@modelcontextprotocol/client 2.4.0) timing the same sequential tools/call requests as
// bench_transports.py's Python workers, on one session pinned to 2026-07-28.
//
//   node benchmarks/ts/bench_client.mjs WARMUP stdio COMMAND [ARG...]
//        spawns the server (StdioClientTransport) and reads its CPU from /proc/<pid>
//   node benchmarks/ts/bench_client.mjs WARMUP http URL [SERVER_PID]
//        Streamable HTTP to a running server; its CPU from /proc/SERVER_PID if given
//
// `greet` takes two legs: the SDK fulfils the input_required round through the elicitation
// handler below (which answers {name: "Ada"} at once) and retries with the echoed sealed
// requestState.  Each batch checks every result's text and that the handler ran once per
// greet.  After the warm-up it prints {"json", "versions"} and then answers each line
// "TOOL N" on stdin with one batch of N calls: [calls/s, client CPU µs/call, server CPU
// µs/call | null], the same protocol as bench_transports.py's Python workers; an empty or
// unknown line ends it.  The SDK resolves from tests/support/ts/node_modules (peers.mjs).

import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

import { peer, version } from './peers.mjs';

const { Client, StreamableHTTPClientTransport } = await peer('@modelcontextprotocol/client');
const { StdioClientTransport } = await peer('@modelcontextprotocol/client/stdio');

const warmup = Number(process.argv[2]);
const [kind, target, ...rest] = process.argv.slice(3);
if (!(warmup >= 0) || !['stdio', 'http'].includes(kind) || !target) {
    process.stderr.write('usage: bench_client.mjs WARMUP stdio COMMAND [ARG...] | http URL [PID]\n');
    process.exit(2);
}

const TOOLS = ['greet', 'plain'];
const EXPECTED = { greet: 'Hello Ada', plain: 'done' };
let answers = 0;

const client = new Client(
    { name: 'bench-ts-client', version: '1.0' },
    { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } } }
);
client.setRequestHandler('elicitation/create', async () => {
    answers += 1;
    return { action: 'accept', content: { name: 'Ada' } };
});

const transport =
    kind === 'stdio'
        ? new StdioClientTransport({ command: target, args: rest, env: { ...process.env }, stderr: 'inherit' })
        : new StreamableHTTPClientTransport(new URL(target));
await client.connect(transport);
if (client.getNegotiatedProtocolVersion() !== '2026-07-28') {
    throw new Error(`the TS client settled on ${client.getNegotiatedProtocolVersion()}`);
}
const serverPid = kind === 'stdio' ? transport.pid : rest[0] ? Number(rest[0]) : null;
const ticksPerSecond = 100; // USER_HZ on Linux; /proc/<pid>/stat counts in these ticks

function serverCpu() {
    if (!serverPid) return null;
    try {
        const fields = readFileSync(`/proc/${serverPid}/stat`, 'utf8').split(')').pop().trim().split(' ');
        return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
    } catch {
        return null;
    }
}

async function batch(tool, n) {
    const askedBefore = answers;
    const serverBefore = serverCpu();
    const clientBefore = process.cpuUsage();
    const start = process.hrtime.bigint();
    for (let i = 0; i < n; i++) {
        const result = await client.callTool({ name: tool, arguments: {} });
        const text = result.content?.[0]?.text;
        if (text !== EXPECTED[tool]) throw new Error(`${tool} returned ${JSON.stringify(result)}`);
    }
    const elapsed = Number(process.hrtime.bigint() - start) / 1e9;
    const used = process.cpuUsage(clientBefore);
    const serverAfter = serverCpu();
    const asked = answers - askedBefore;
    if (asked !== (tool === 'greet' ? n : 0)) throw new Error(`${tool}: the handler ran ${asked} times in ${n} calls`);
    const server = serverBefore === null || serverAfter === null ? null : ((serverAfter - serverBefore) * 1e6) / n;
    return [n / elapsed, (used.user + used.system) / n, server];
}

// Warm up, say ready, then run the batches the harness asks for on stdin ("TOOL N" per
// line; each answered by one JSON line) so its runs interleave with the other sides'.
if (warmup) for (const tool of TOOLS) await batch(tool, warmup);
const emit = record => process.stdout.write(JSON.stringify(record) + '\n');
emit({
    json: 'V8 JSON',
    versions: { node: process.versions.node, '@modelcontextprotocol/client': version('@modelcontextprotocol/client') }
});
for await (const line of createInterface({ input: process.stdin })) {
    const [tool, n] = line.trim().split(' ');
    if (!TOOLS.includes(tool)) break;
    emit(await batch(tool, Number(n)));
}
await client.close();
