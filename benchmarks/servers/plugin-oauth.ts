/**
 * servers/plugin.ts as an OAuth resource server: every request carries a JWT access token, verified
 * against the key set of the authorization server at BENCH_OAUTH_ISSUER (benchmarks/auth-cost.ts runs a
 * minimal one). The token is for BENCH_OAUTH_RESOURCE.
 */
import { servePlugin } from './plugin-app.js'

const issuer = process.env.BENCH_OAUTH_ISSUER
const resource = process.env.BENCH_OAUTH_RESOURCE
if (issuer === undefined || resource === undefined) throw new Error('BENCH_OAUTH_ISSUER and BENCH_OAUTH_RESOURCE must be set')
await servePlugin({ auth: { oauth: { resource, authorizationServers: [issuer] } } })
