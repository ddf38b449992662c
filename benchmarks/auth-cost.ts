/**
 * What OAuth costs on the hot path: `tools/call` → `echo` with a JWT access token verified by the plugin
 * (servers/plugin-oauth.ts: `auth.oauth`, keys fetched once from a minimal authorization server this
 * benchmark runs, then cached) against the same request to the plugin without `auth` (servers/plugin.ts),
 * in alternating rounds (support/paired-cost.ts). Both are sent the same bytes, the token included.
 * Goal: ≥ 0.85 × the unauthenticated plugin by req/s.
 *
 * `npm run bench -- auth-cost [pairs]` (default 5 pairs).
 */
import { createServer, type Server } from 'node:http'
import { once } from 'node:events'
import { exportJWK, generateKeyPair, SignJWT } from 'jose'
import type { Benchmark } from './support/benchmark.js'
import { LEGACY_ECHO } from './support/echo-round.js'
import { measurePairedCost, pairCount } from './support/paired-cost.js'
import { printEnvironment } from './support/report.js'

const RESOURCE = 'https://bench.example/mcp'

/** An authorization server with only what a resource server reads: its RFC 8414 metadata and its key set. */
async function startKeyServer (): Promise<{ issuer: string, token: string, server: Server }> {
  const { publicKey, privateKey } = await generateKeyPair('ES256')
  const jwk = { ...await exportJWK(publicKey), kid: 'bench', alg: 'ES256', use: 'sig' }
  let issuer = ''
  const server = createServer((request, response) => {
    const body = request.url === '/.well-known/oauth-authorization-server'
      ? { issuer, jwks_uri: `${issuer}/jwks` }
      : request.url === '/jwks' ? { keys: [jwk] } : undefined
    response.writeHead(body === undefined ? 404 : 200, { 'content-type': 'application/json' }).end(JSON.stringify(body ?? {}))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('the key server has no port')
  issuer = `http://127.0.0.1:${address.port}`
  const token = await new SignJWT({ scope: 'echo', client_id: 'bench-client' })
    .setProtectedHeader({ alg: 'ES256', kid: 'bench', typ: 'at+jwt' })
    .setIssuer(issuer).setAudience(RESOURCE).setSubject('bench-user').setIssuedAt().setExpirationTime('2h').setJti('bench')
    .sign(privateKey)
  return { issuer, token, server }
}

const authCost: Benchmark = {
  description: 'tools/call echo: a JWT access token verified with cached keys (auth.oauth) vs no auth (alternating rounds)',
  async run (config, args) {
    const pairs = pairCount(args.find(arg => /^\d+$/.test(arg)))
    printEnvironment(config)
    const { issuer, token, server } = await startKeyServer()
    // The server processes inherit the environment: plugin-oauth.ts reads where the keys are.
    process.env.BENCH_OAUTH_ISSUER = issuer
    process.env.BENCH_OAUTH_RESOURCE = RESOURCE
    try {
      const call = { ...LEGACY_ECHO, request: { ...LEGACY_ECHO.request, headers: { ...LEGACY_ECHO.request.headers, authorization: `Bearer ${token}` } } }
      return (await measurePairedCost(config, { what: 'OAuth (a JWT verified per request)', on: 'plugin-oauth', off: 'plugin', pairs, call, maxCost: 0.15 })).ok
    } finally {
      server.close()
    }
  }
}

export default authCost
