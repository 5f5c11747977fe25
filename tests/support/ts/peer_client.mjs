// A client built on the official TypeScript SDK v2 (@modelcontextprotocol/client 2.4.0): the
// peer our server must work with (tests/transports/interop/test_interop_ts_client.py).
//
//   node peer_client.mjs ERA URL                  Streamable HTTP
//   node peer_client.mjs ERA stdio COMMAND ARG... a stdio server the SDK spawns
//
// ERA is 2026 (versionNegotiation pinned to 2026-07-28), auto (probe server/discover, fall
// back to initialize) or legacy (the plain 2025 initialize handshake).
//
// It calls the MRTR fixtures of mrtr's default app.  Its elicitation, sampling and roots
// handlers answer deterministically; on 2026-07-28 the SDK fulfils input_required rounds
// through them and retries with the echoed requestState, on 2025 they answer the server's
// own requests (mrtr's legacy shim).  Prints one JSON line per step on stdout:
//   {"step": "connect", "era", "version", "server"}
//   {"step": "call", "kind", "name", "text" | "error", "asked", "legs", "echoes"}
// where `asked` lists the questions the handlers got, `legs` the requests sent for the call
// and `echoes` every requestState the call received with whether the next leg echoed it
// byte for byte.  Over HTTP, {"step": "headers", ...}: a call whose arguments are mirrored
// into headers.  Then {"step": "tamper", ...} (2026 only: a retry whose state was changed
// by one character, sent by hand) and {"step": "done"}.

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const [era, target, ...rest] = process.argv.slice(2);
const MODES = { 2026: { pin: '2026-07-28' }, auto: 'auto', legacy: 'legacy' };
if (!(era in MODES) || !target) {
    process.stderr.write('usage: peer_client.mjs 2026|auto|legacy URL | stdio COMMAND [ARG...]\n');
    process.exit(2);
}

const emit = record => process.stdout.write(JSON.stringify(record) + '\n');

// What a user would type: one value per field the form asks for.
const FORM_VALUES = { name: 'Ada', color: 'teal', context: 'interop', ok: true, confirm: true };
let asked = [];

const client = new Client(
    { name: 'peer-ts-client', version: '2.4.0-peer' },
    {
        capabilities: { elicitation: { form: {} }, sampling: {}, roots: {} },
        versionNegotiation: { mode: MODES[era] }
    }
);
client.setRequestHandler('elicitation/create', async request => {
    asked.push(['elicitation', request.params.message]);
    const fields = Object.keys(request.params.requestedSchema?.properties ?? {});
    const content = Object.fromEntries(fields.map(field => [field, FORM_VALUES[field] ?? 'x']));
    return { action: 'accept', content };
});
client.setRequestHandler('sampling/createMessage', async request => {
    asked.push(['sampling', request.params.maxTokens]);
    return { role: 'assistant', content: { type: 'text', text: 'Paris' }, model: 'peer-llm' };
});
client.setRequestHandler('roots/list', async () => {
    asked.push(['roots', null]);
    return { roots: [{ uri: 'file:///ts/workspace', name: 'ws' }] };
});

const transport =
    target === 'stdio'
        ? new StdioClientTransport({ command: rest[0], args: rest.slice(1), env: { ...process.env }, stderr: 'inherit' })
        : new StreamableHTTPClientTransport(new URL(target));

// The wire as the SDK writes and reads it: requests sent, and results with a requestState.
let sent = [];
let received = [];
const send = transport.send.bind(transport);
transport.send = (message, options) => {
    if (message.method) sent.push(message);
    return send(message, options);
};

await client.connect(transport);
const deliver = transport.onmessage;
transport.onmessage = (message, extra) => {
    if (message.result?.resultType === 'input_required') received.push(message.result);
    return deliver(message, extra);
};
emit({
    step: 'connect',
    era: client.getProtocolEra() ?? null,
    version: client.getNegotiatedProtocolVersion() ?? null,
    server: client.getServerVersion() ?? null
});

function textOf(result) {
    if (result.messages) return result.messages.map(message => message.content.text).join('\n');
    return (result.content ?? []).map(block => block.text).join('\n');
}

async function call(kind, name, run) {
    asked = [];
    sent = [];
    received = [];
    const record = { step: 'call', kind, name };
    try {
        const result = await run();
        record.text = textOf(result);
        if (result.isError) record.isError = true;
    } catch (error) {
        record.error = { code: error.code ?? null, message: String(error.message ?? error) };
    }
    const legs = sent.filter(message => message.method === (kind === 'tool' ? 'tools/call' : 'prompts/get'));
    record.asked = asked;
    record.legs = legs.length;
    record.echoes = received.map((result, round) => ({
        state: result.requestState ?? null,
        echoed: (legs[round + 1]?.params?.requestState ?? null) === (result.requestState ?? null)
    }));
    emit(record);
}

const TOOLS = [
    ['test_input_required_result_elicitation', {}],
    ['test_input_required_result_sampling', {}],
    ['test_input_required_result_list_roots', {}],
    ['test_input_required_result_multi_round', {}],
    ['test_input_required_result_request_state', {}],
    ['test_input_required_result_multiple_inputs', {}]
];
for (const [name, args] of TOOLS) {
    await call('tool', name, () => client.callTool({ name, arguments: args }));
}
await call('prompt', 'test_input_required_result_prompt', () =>
    client.getPrompt({ name: 'test_input_required_result_prompt', arguments: {} })
);

if (target !== 'stdio') {
    // SEP-2243: over HTTP the SDK mirrors x-mcp-header arguments into Mcp-Param-* headers
    // (non-ASCII values base64-encoded); the server checks them against the body.
    const headers = { step: 'headers' };
    try {
        await client.listTools();
        const result = await client.callTool({ name: 'test_header_mirroring', arguments: { region: 'Zürich', verbose: true } });
        headers.text = textOf(result);
    } catch (error) {
        headers.error = { code: error.code ?? null, message: String(error.message ?? error) };
    }
    emit(headers);
}

if (client.getProtocolEra() === 'modern') {
    // By hand: the first leg's input_required result, then a retry whose sealed state differs
    // in its last character.  The server must refuse it (-32602), never run the tool on it.
    const name = 'test_input_required_result_tampered_state';
    const params = { name, arguments: {} };
    const first = await client.callTool(params, { allowInputRequired: true });
    const state = first.requestState;
    const changed = state.slice(0, -1) + (state.endsWith('A') ? 'B' : 'A');
    const inputResponses = { confirm: { action: 'accept', content: { ok: true } } };
    const record = { step: 'tamper', resultType: first.resultType ?? null, state };
    try {
        const result = await client.callTool({ ...params, inputResponses, requestState: changed }, { allowInputRequired: true });
        record.result = result;
    } catch (error) {
        record.error = { code: error.code ?? null, message: String(error.message ?? error) };
    }
    try {
        const honest = await client.callTool({ ...params, inputResponses, requestState: state }, { allowInputRequired: true });
        record.honest = textOf(honest);
    } catch (error) {
        record.honestError = String(error.message ?? error);
    }
    emit(record);
}

emit({ step: 'done' });
await client.close();
