// A real OpenID provider (oidc-provider, pinned in package.json) as the authorization server of
// mrtr's auth tests.  Run: node provider.mjs CONFIG.json  (tests/support/oidc_provider.py does).
//
// It listens on 127.0.0.1 (the port in the config, 0 for a free one), then prints one line,
// `ISSUER http://127.0.0.1:PORT`, and serves until SIGTERM or SIGINT.  The config file (JSON;
// secrets stay out of the command line) holds:
//   port           0 or a port number
//   issuer_path    "" (the default) or e.g. "/tenant1": the issuer is http://127.0.0.1:PORT/tenant1
//   well_known     where the metadata is served (default all): "oauth" (RFC 8414, the path
//                  inserted after /.well-known/oauth-authorization-server), "openid-insert"
//                  (/.well-known/openid-configuration/tenant1), "openid" (OpenID Discovery:
//                  /tenant1/.well-known/openid-configuration); the client's fallbacks tested
//   users          {name: {password, claims}}: who can log in (the account id is the name)
//   clients        OAuth client metadata, as registered (snake_case, RFC 7591 names)
//   resources      [{match, scope, alg?, format?, access_token_ttl?}]: the resource servers
//                  tokens are issued for (RFC 8707); `match` is the resource URL, a `*` in it
//                  standing for digits (a port chosen after the provider started); the token's
//                  `aud` is the resource the client asked for; `format` "jwt" (the default,
//                  signed with `alg`, RS256 or ES256) or "opaque" (for introspection: the
//                  package introspects no JWT)
//   ttl            {AccessToken, AuthorizationCode, RefreshToken, ...} in seconds
//   refresh_tokens "always" (the default: to every client allowed the refresh_token grant, as
//                  many OAuth servers do), "never", or "openid" (the package's own OpenID rule:
//                  only for offline_access asked with prompt=consent)
//   registration   true: dynamic client registration (RFC 7591) at /reg, no initial token
//   client_metadata_documents  {"https://client.test": "http://127.0.0.1:PORT"}: Client ID
//                  Metadata Documents (CIMD) on: a client_id URL on one of these https origins
//                  is fetched from the loopback server beside it (the test's), nothing else is
//                  fetched (the package fetches https only, and never from loopback by itself)
//   client_credentials  true: the client_credentials grant
//   dpop           true: DPoP (RFC 9449) at the token endpoint: a token request with a proof
//                  gets a token bound to its key (cnf.jkt); off by default (the package's own
//                  default is on), so a test sees it only where it asks for it
//
// The interactions are ours, minimal and plain HTML (the package's development views accept
// any name): a login form that knows only the configured users, then a consent form.
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';

import Provider, { errors } from 'oidc-provider';

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const prefix = config.issuer_path ?? '';
if (prefix && !/^(\/[A-Za-z0-9._~-]+)+$/.test(prefix)) throw new Error(`issuer_path: ${prefix}?`);
const cimdOrigins = Object.entries(config.client_metadata_documents ?? {});
const wellKnown = new Set(config.well_known ?? ['oauth', 'openid-insert', 'openid']);
const users = config.users ?? {};
const resources = (config.resources ?? []).map((resource) => ({
  ...resource,
  // `*` stands for digits: the MCP server's port, chosen after the provider started
  pattern: new RegExp(`^${resource.match.split('*').map(escapeRegExp).join('[0-9]+')}$`),
}));

function escapeRegExp(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

// One key of each kind: a resource picks RS256 (the default) or ES256 for its tokens.
function signingKey(type, options, alg) {
  const { privateKey } = crypto.generateKeyPairSync(type, options);
  const jwk = privateKey.export({ format: 'jwk' });
  return { ...jwk, alg, use: 'sig', kid: `${alg.toLowerCase()}-${crypto.randomUUID()}` };
}
const jwks = {
  keys: [
    signingKey('rsa', { modulusLength: 2048 }, 'RS256'),
    signingKey('ec', { namedCurve: 'P-256' }, 'ES256'),
  ],
};

const resourceScopes = resources.flatMap((resource) => resource.scope.split(' '));

function resourceFor(indicator) {
  return resources.find((resource) => resource.pattern.test(indicator));
}

function page(title, body) {
  return `<!DOCTYPE html><html><head><meta charset="utf-8"><title>${escapeHtml(title)}</title></head>`
    + `<body><h1>${escapeHtml(title)}</h1>${body}</body></html>`;
}

function loginPage(uid, clientId, error) {
  const message = error ? `<p class="error">${escapeHtml(error)}</p>` : '';
  return page('Sign-in', `${message}<p>to ${escapeHtml(clientId)}</p>
<form method="post" action="${prefix}/interaction/${escapeHtml(uid)}/login">
<input type="text" name="login" autofocus><input type="password" name="password">
<button type="submit" name="submit" value="login">Sign-in</button></form>`);
}

function consentPage(uid, clientId, details) {
  const scopes = [
    ...(details.missingOIDCScope ?? []),
    ...Object.values(details.missingResourceScopes ?? {}).flat(),
  ];
  return page('Authorize', `<p>${escapeHtml(clientId)} asks for: ${escapeHtml(scopes.join(' '))}</p>
<form method="post" action="${prefix}/interaction/${escapeHtml(uid)}/consent">
<button type="submit" name="decision" value="allow">Allow</button>
<button type="submit" name="decision" value="deny">Deny</button></form>`);
}

async function readForm(req) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > 64 * 1024) throw new Error('form too large');
    chunks.push(chunk);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

function send(res, status, html) {
  res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
  res.end(html);
}

async function interaction(provider, req, res, path) {
  const details = await provider.interactionDetails(req, res);
  const { uid, prompt, params } = details;
  const [, , , action] = path.split('/'); // /interaction/UID[/ACTION]
  if (req.method === 'GET' && action === undefined) {
    if (prompt.name === 'login') return send(res, 200, loginPage(uid, params.client_id));
    if (prompt.name === 'consent') return send(res, 200, consentPage(uid, params.client_id, prompt.details));
    return send(res, 501, page('Not implemented', escapeHtml(prompt.name)));
  }
  if (req.method === 'POST' && action === 'login' && prompt.name === 'login') {
    const form = await readForm(req);
    const user = users[form.get('login')];
    // the same answer for an unknown user and a wrong password
    if (!user || !crypto.timingSafeEqual(hash(form.get('password')), hash(user.password))) {
      return send(res, 401, loginPage(uid, params.client_id, 'Unknown user or wrong password'));
    }
    return provider.interactionFinished(req, res, { login: { accountId: form.get('login') } }, {
      mergeWithLastSubmission: false,
    });
  }
  if (req.method === 'POST' && action === 'consent' && prompt.name === 'consent') {
    const form = await readForm(req);
    if (form.get('decision') !== 'allow') {
      return provider.interactionFinished(req, res, {
        error: 'access_denied', error_description: 'the user denied the request',
      }, { mergeWithLastSubmission: false });
    }
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: details.session.accountId, clientId: params.client_id });
    const missing = prompt.details;
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    for (const [indicator, scope] of Object.entries(missing.missingResourceScopes ?? {})) {
      grant.addResourceScope(indicator, scope.join(' '));
    }
    const grantId = await grant.save();
    return provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
  }
  return send(res, 400, page('Bad request', 'not this step of the interaction'));
}

// The package's outgoing requests (a CIMD): an https URL of a mapped origin, fetched from its
// loopback stand-in.  The package's own dispatcher refuses loopback addresses (its SSRF
// guard): this one only ever reaches the stand-ins the test named.
function fetchMapped(url, options) {
  const href = String(url);
  for (const [origin, local] of cimdOrigins) {
    if (href.startsWith(`${origin}/`)) {
      const { dispatcher, ...rest } = options;
      return globalThis.fetch(local + href.slice(origin.length), rest);
    }
  }
  return Promise.reject(new Error('no stand-in for this origin'));
}

const OAUTH = '/.well-known/oauth-authorization-server';
const OPENID = '/.well-known/openid-configuration';

// The provider's own path for a request's path, or undefined: not served (404).
function route(path) {
  if (path === OAUTH + prefix) return wellKnown.has('oauth') ? OAUTH : undefined;
  if (prefix && path === OPENID + prefix) return wellKnown.has('openid-insert') ? OPENID : undefined;
  if (!path.startsWith(`${prefix}/`)) return undefined;
  const inner = path.slice(prefix.length);
  if (inner === OPENID) return wellKnown.has('openid') ? OPENID : undefined;
  if (inner === OAUTH) return undefined; // RFC 8414 inserts the path instead (above)
  return inner;
}

function refreshPolicy(policy) {
  if (policy === 'openid') return {};
  if (policy === 'never') return { issueRefreshToken: async () => false };
  if (policy !== 'always') throw new Error(`refresh_tokens: ${policy}?`);
  return {
    issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
    expiresWithSession: async () => false,
  };
}

function hash(text) {
  return crypto.createHash('sha256').update(String(text ?? '')).digest();
}

function configuration() {
  return {
    clients: config.clients ?? [],
    jwks,
    cookies: { keys: [crypto.randomBytes(32).toString('base64url')] },
    scopes: ['openid', 'offline_access', ...resourceScopes],
    responseTypes: ['code'], // OAuth 2.1: the authorization code flow only
    claims: { openid: ['sub'], profile: ['name'], email: ['email'] },
    async findAccount(ctx, id) {
      const user = users[id];
      if (!user) return undefined;
      return { accountId: id, async claims() { return { ...(user.claims ?? {}), sub: id }; } };
    },
    ...refreshPolicy(config.refresh_tokens ?? 'always'),
    interactions: { url: (ctx, interaction) => `${prefix}/interaction/${interaction.uid}` },
    // OAuth 2.1: every client uses PKCE (S256 is the only method the package offers)
    pkce: { required: () => true },
    fetch: fetchMapped,
    features: {
      devInteractions: { enabled: false },
      clientIdMetadataDocument: { enabled: cimdOrigins.length > 0, ack: 'draft-02' },
      registration: { enabled: Boolean(config.registration) },
      clientCredentials: { enabled: Boolean(config.client_credentials) },
      dPoP: { enabled: Boolean(config.dpop) },
      revocation: { enabled: true },
      introspection: {
        enabled: true,
        // a resource server (a confidential client) introspects the tokens of any client
        allowedPolicy: async (ctx, client, token) => client.clientAuthMethod !== 'none'
          || token.clientId === client.clientId,
      },
      resourceIndicators: {
        enabled: true,
        // a token request that names no resource gets the one the grant holds
        useGrantedResource: () => true,
        async getResourceServerInfo(ctx, indicator) {
          const resource = resourceFor(indicator);
          if (!resource) throw new errors.InvalidTarget();
          return {
            scope: resource.scope,
            accessTokenFormat: resource.format ?? 'jwt',
            jwt: { sign: { alg: resource.alg ?? 'RS256' } },
            ...(resource.access_token_ttl ? { accessTokenTTL: resource.access_token_ttl } : {}),
          };
        },
      },
    },
    // seconds by artifact (AccessToken, AuthorizationCode, RefreshToken, ...); the rest default
    ttl: Object.fromEntries(Object.entries(config.ttl ?? {}).filter(([, seconds]) => seconds)),
  };
}

let handle = (req, res) => send(res, 503, 'starting');
const server = http.createServer((req, res) => handle(req, res));
server.listen(config.port ?? 0, '127.0.0.1', () => {
  const origin = `http://127.0.0.1:${server.address().port}`;
  const issuer = origin + prefix;
  const provider = new Provider(issuer, configuration());
  const callback = provider.callback();
  handle = async (req, res) => {
    const url = new URL(req.url, origin);
    const path = route(url.pathname);
    try {
      if (path === undefined) return send(res, 404, page('Not found', ''));
      if (path.startsWith('/interaction/')) return await interaction(provider, req, res, path);
      // what a mount under the issuer's path does: the package reads its prefix from these
      req.url = path + url.search;
      req.originalUrl = prefix + req.url;
      return await callback(req, res);
    } catch (error) {
      if (!res.headersSent) send(res, 400, page('Error', escapeHtml(error.message)));
      else res.end();
    }
  };
  process.stdout.write(`ISSUER ${issuer}\n`);
});

function stop() {
  server.close();
  server.closeAllConnections();
  process.exit(0);
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
