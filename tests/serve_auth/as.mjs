// A real authorization server for `serve.auth`'s tests: oidc-provider (pinned in tests/npm), run
// from the npm folder so that its packages resolve. Subcommands:
//   serve PORT KEYS RESOURCE   the provider at http://127.0.0.1:PORT, issuing JWT access tokens
//                              for RESOURCE (opaque ones to client `opaque`), keys kept in KEYS
//                              so that a restarted provider signs with the same ones
//   token ISSUER CLIENT SECRET RESOURCE SCOPE   a client credentials grant; prints the token
//   mint KEYS                  a token made as stdin's JSON says ({key, alg, kid, claims, header})
import * as fs from 'node:fs';
import * as jose from 'jose';

async function keys(file) {
  if (fs.existsSync(file)) return JSON.parse(fs.readFileSync(file, 'utf8'));
  const made = { keys: [] };
  for (const [alg, kid, opts] of [['RS256', 'k-rsa', {}], ['ES256', 'k-ec', {}], ['EdDSA', 'k-ed', { crv: 'Ed25519' }]]) {
    const { privateKey } = await jose.generateKeyPair(alg, { extractable: true, ...opts });
    made.keys.push({ ...(await jose.exportJWK(privateKey)), kid, alg, use: 'sig' });
  }
  fs.writeFileSync(file, JSON.stringify(made));
  return made;
}

async function serve([port, keysFile, resource]) {
  const { default: Provider } = await import('oidc-provider');
  const issuer = `http://127.0.0.1:${port}`;
  const scope = 'tools.read payments.write';
  const provider = new Provider(issuer, {
    jwks: await keys(keysFile),
    clients: [
      { client_id: 'ci', client_secret: 'ci-secret', grant_types: ['client_credentials'], redirect_uris: [], response_types: [], scope },
      // Secrets of 8 characters or more: toolrun masks them (the client test's spec reads them).
      { client_id: 'ci-client', client_secret: 'ci-client-secret', grant_types: ['client_credentials'], redirect_uris: [], response_types: [], scope },
      { client_id: 'reader', client_secret: 'reader-secret', grant_types: ['client_credentials'], redirect_uris: [], response_types: [], scope: 'tools.read' },
      { client_id: 'opaque', client_secret: 'opaque-secret', grant_types: ['client_credentials'], redirect_uris: [], response_types: [], scope },
      { client_id: 'resource-server', client_secret: 'resource-server-secret', grant_types: [], redirect_uris: [], response_types: [] },
      // A native app's loopback redirect takes any port (RFC 8252 section 7.3): toolrun's listener's.
      { client_id: 'app-native', application_type: 'native', token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], redirect_uris: ['http://127.0.0.1/callback'], scope: `openid offline_access ${scope}` },
      { client_id: 'app', token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], redirect_uris: ['http://127.0.0.1/callback'], scope: `openid offline_access ${scope}` },
    ],
    scopes: ['openid', 'offline_access', 'tools.read', 'payments.write'],
    pkce: { required: () => true },
    features: {
      devInteractions: { enabled: true },
      clientCredentials: { enabled: true },
      introspection: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => resource,
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, indicator, client) => ({
          scope,
          audience: indicator,
          accessTokenTTL: 300,
          accessTokenFormat: client.clientId === 'opaque' ? 'opaque' : 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        }),
      },
    },
  });
  provider.listen(Number(port), '127.0.0.1', () => console.log(`ready ${issuer}`));
}

async function token([issuer, client, secret, resource, scope]) {
  const meta = await (await fetch(`${issuer}/.well-known/openid-configuration`)).json();
  const body = new URLSearchParams({ grant_type: 'client_credentials', resource, scope });
  const resp = await fetch(meta.token_endpoint, {
    method: 'POST',
    headers: { authorization: 'Basic ' + Buffer.from(`${client}:${secret}`).toString('base64'), 'content-type': 'application/x-www-form-urlencoded' },
    body,
  });
  const json = await resp.json();
  if (!json.access_token) throw new Error(JSON.stringify(json));
  console.log(json.access_token);
}

async function mint([keysFile]) {
  const want = JSON.parse(fs.readFileSync(0, 'utf8'));
  const b64 = (v) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');
  const set = JSON.parse(fs.readFileSync(keysFile, 'utf8'));
  const jwk = (kid) => set.keys.find((k) => k.kid === kid);
  let out;
  if (want.key === 'none') {
    out = `${b64({ alg: 'none', typ: 'at+jwt' })}.${b64(want.claims)}.`;
  } else if (want.key === 'hs-public') {
    // The classic confusion: the issuer's public key, as a PEM, used as an HMAC secret.
    const pub = await jose.importJWK({ ...jwk('k-rsa'), d: undefined, p: undefined, q: undefined, dp: undefined, dq: undefined, qi: undefined }, 'RS256', { extractable: true });
    const pem = await jose.exportSPKI(pub);
    out = await new jose.SignJWT(want.claims).setProtectedHeader({ alg: 'HS256', kid: 'k-rsa', typ: 'at+jwt' }).sign(new TextEncoder().encode(pem));
  } else if (want.key === 'stranger') {
    const { privateKey } = await jose.generateKeyPair('RS256');
    out = await new jose.SignJWT(want.claims).setProtectedHeader({ alg: 'RS256', kid: 'k-stranger', typ: 'at+jwt' }).sign(privateKey);
  } else {
    const k = jwk(want.key);
    const header = { alg: k.alg, kid: k.kid, typ: 'at+jwt', ...(want.header || {}) };
    out = await new jose.SignJWT(want.claims).setProtectedHeader(header).sign(await jose.importJWK(k, k.alg));
  }
  console.log(out);
}

const [cmd, ...args] = process.argv.slice(2);
await ({ serve, token, mint })[cmd](args);
