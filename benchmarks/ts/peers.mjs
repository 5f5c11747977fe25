// Imports the official TypeScript SDK v2 from the test peers' install
// (tests/support/ts/node_modules, `make node-peers`) so the benchmarks need no npm install of
// their own.  ESM ignores NODE_PATH and resolves bare names from the importing file, so the
// package's own `exports` map is read here: its "import" entry for the subpath.

import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

const MODULES = new URL('../../tests/support/ts/node_modules/', import.meta.url);

export async function peer(specifier) {
    const [scope, name, ...rest] = specifier.split('/');
    const root = new URL(`${scope}/${name}/`, MODULES);
    const manifest = JSON.parse(readFileSync(new URL('package.json', root), 'utf8'));
    const entry = manifest.exports[rest.length ? `./${rest.join('/')}` : '.'];
    const target = typeof entry === 'string' ? entry : (entry.import.default ?? entry.import);
    return import(pathToFileURL(new URL(target, root).pathname).href);
}

export function version(name) {
    return JSON.parse(readFileSync(new URL(`${name}/package.json`, MODULES), 'utf8')).version;
}
