/**
 * A real OAuth 2.1 authorization server for the tests of the resource server: oidc-provider
 * (https://github.com/panva/node-oidc-provider) in this process on a free loopback port, issuing
 * RFC 9068 JWT access tokens for the configured resources (RFC 8707 `resource`, `aud` = the resource)
 * to pre-registered confidential clients through the `client_credentials` grant.
 *
 * Around the provider's request listener sits a thin one of ours: it counts what the resource server
 * fetches (discovery, JWKS) and what clients ask (tokens), serves RFC 8414 metadata at the
 * path-inserted URL for an issuer with a path, and makes the JWKS endpoint misbehave on demand.
 * Keys can be rotated and the server stopped and started again, always on the same port and issuer.
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http'
import { randomBytes } from 'node:crypto'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import type Provider from 'oidc-provider'
import { freePort } from './redis-server.js'
import { generateSigningKey, type SigningAlgorithm, type SigningKey } from './signing-keys.js'
import type { Teardown } from './teardown.js'

/** The discovery documents an authorization server may publish. */
export type MetadataDocument = 'oauth-authorization-server' | 'openid-configuration'

/**
 * How the JWKS endpoint misbehaves: 500, a body that is not JSON, a 10 MB key set, no answer at all,
 * JSON whose `keys` are not keys, or the published keys (same `kid`s) with coordinates that are no
 * point of their curve.
 */
export type JwksFault = '500' | 'garbage' | 'huge' | 'hang' | 'not-keys' | 'bad-keys'

export interface AuthorizationServerOptions {
  /** The resource URIs (the MCP endpoints' canonical URIs) tokens may be issued for. */
  resources: string[]
  /** Those of `resources` whose tokens are opaque (only introspection, RFC 7662, tells what they are); default none: JWTs. */
  opaqueResources?: string[]
  /** Every scope a client may ask for; every client is allowed all of them. */
  scopes: string[]
  /** Lifetime of an access token (default 300). */
  accessTokenTtlSeconds?: number
  /** The issuer's path, as `/tenant-a` (default none: the issuer is the origin). */
  path?: string
  /** How access tokens are signed (default ES256). */
  algorithm?: SigningAlgorithm
  /** How many confidential clients are registered (default 2). */
  clients?: number
  /**
   * The discovery documents served (default both). RFC 8414 metadata is served at
   * `/.well-known/oauth-authorization-server<path>` only (path insertion, RFC 8414 §3.1), OpenID
   * discovery at `<issuer>/.well-known/openid-configuration` only (OpenID Connect Discovery §4).
   */
  metadata?: MetadataDocument[]
}

export interface AuthorizationServerClient {
  clientId: string
  clientSecret: string
}

export interface TokenRequest {
  /** The RFC 8707 `resource`: one of the configured resources, else the server refuses (`invalid_target`). */
  resource: string
  /** The scopes asked for (default none); a list is sent space-separated. */
  scope?: string | string[]
  /** Who asks (default the first client). */
  client?: AuthorizationServerClient
}

export interface AuthorizationServer {
  /** The issuer identifier, `http://127.0.0.1:<port><path>`: the tokens' `iss`. */
  readonly issuer: string
  readonly jwksUri: string
  readonly tokenEndpoint: string
  readonly port: number
  /** The registered confidential clients (`client_credentials`, `client_secret_basic`). */
  readonly clients: readonly AuthorizationServerClient[]
  /** GETs of the JWKS endpoint, faulty answers included. */
  readonly jwksRequests: number
  /** GETs of a discovery document that was served (either kind). */
  readonly discoveryRequests: number
  /** POSTs to the token endpoint. */
  readonly tokenRequests: number
  /** POSTs to the introspection endpoint (RFC 7662), served to every registered client. */
  readonly introspectionRequests: number
  /** Every request received, as method and path (with its query), in order. */
  readonly requests: ReadonlyArray<{ method: string, path: string }>
  /** The key new tokens are signed with (first in the JWKS). */
  readonly signingKey: SigningKey
  /** The keys the JWKS publishes, current first. */
  readonly publishedKeys: readonly SigningKey[]
  readonly listening: boolean
  /** Set to make every GET of the JWKS endpoint misbehave; `undefined` (the default) serves it. */
  jwksFault: JwksFault | undefined
  /** A `Cache-Control` header for JWKS answers (oidc-provider sends none). */
  jwksCacheControl: string | undefined
  /**
   * A real `client_credentials` token request over HTTP (HTTP Basic client authentication);
   * resolves with the access token, or throws with the server's error answer.
   */
  token: (request: TokenRequest) => Promise<string>
  /**
   * Makes a new key current (tokens from now on carry its `kid`); the JWKS keeps publishing the
   * previous keys when `keepOld`, else only the new one. Same port, same issuer, same clients.
   */
  rotateKeys: (options: { keepOld: boolean }) => Promise<SigningKey>
  /** Stops listening and drops every connection (an outage: connections are refused). */
  stop: () => Promise<void>
  /** Listens again on the same port, with the same keys. */
  start: () => Promise<void>
}

const JWKS_ROUTE = '/jwks'
const TOKEN_ROUTE = '/token'
const INTROSPECTION_ROUTE = '/introspect'
const OAUTH_METADATA = '/.well-known/oauth-authorization-server'
const OPENID_METADATA = '/.well-known/openid-configuration'
const HUGE_JWKS_BYTES = 10 * 1024 * 1024

/**
 * oidc-provider's notices ("Unsupported runtime" on Node 20, the development-only in-memory adapter)
 * go to console.warn and console.info (node_modules/oidc-provider/lib/helpers/attention.js). While it
 * loads or builds a provider, those two drop its notices and pass everything else on; the returned
 * function puts them back once every holder has released them.
 */
const PROVIDER_NOTICE = /^(?:\x1b\[[\d;]*m)?oidc-provider (?:NOTICE|WARNING): /
let holders = 0
const consoleOutputs = { warn: console.warn, info: console.info }

function silenceProviderNotices (): () => void {
  if (holders++ === 0) {
    for (const name of ['warn', 'info'] as const) {
      const original = consoleOutputs[name] = console[name]
      console[name] = (...args: unknown[]) => {
        if (typeof args[0] === 'string' && PROVIDER_NOTICE.test(args[0])) return
        original.apply(console, args)
      }
    }
  }
  return () => {
    if (--holders === 0) Object.assign(console, consoleOutputs)
  }
}

type ProviderModule = typeof import('oidc-provider')
let providerModule: Promise<ProviderModule> | undefined

async function importProvider (): Promise<ProviderModule> {
  const release = silenceProviderNotices()
  try {
    return await import('oidc-provider')
  } finally {
    release()
  }
}

function loadProvider (): Promise<ProviderModule> {
  providerModule ??= importProvider()
  return providerModule
}

class TestAuthorizationServer implements AuthorizationServer {
  readonly issuer: string
  readonly jwksUri: string
  readonly tokenEndpoint: string
  readonly port: number
  readonly clients: readonly AuthorizationServerClient[]
  jwksRequests = 0
  discoveryRequests = 0
  tokenRequests = 0
  introspectionRequests = 0
  readonly requests: Array<{ method: string, path: string }> = []
  jwksFault: JwksFault | undefined
  jwksCacheControl: string | undefined
  readonly #module: ProviderModule
  readonly #options: Required<AuthorizationServerOptions>
  readonly #server: http.Server
  #keys: SigningKey[]
  #listener: (req: IncomingMessage, res: ServerResponse) => Promise<void>
  /** The last error the provider answered 500 for, so a token request refused with a 500 can say what it was. */
  #serverError: Error | undefined

  constructor (module: ProviderModule, options: Required<AuthorizationServerOptions>, port: number, key: SigningKey) {
    this.#module = module
    this.#options = options
    this.port = port
    this.issuer = `http://127.0.0.1:${port}${options.path}`
    this.jwksUri = `${this.issuer}${JWKS_ROUTE}`
    this.tokenEndpoint = `${this.issuer}${TOKEN_ROUTE}`
    this.clients = Array.from({ length: options.clients }, (_, i) => ({
      clientId: `mcp-test-client-${i + 1}`,
      clientSecret: randomBytes(24).toString('base64url')
    }))
    this.#keys = [key]
    this.#listener = this.#provider().callback()
    this.#server = http.createServer((req, res) => { this.#handle(req, res) })
  }

  get signingKey (): SigningKey {
    return this.#keys[0]!
  }

  get publishedKeys (): readonly SigningKey[] {
    return this.#keys
  }

  get listening (): boolean {
    return this.#server.listening
  }

  async token ({ resource, scope, client = this.clients[0]! }: TokenRequest): Promise<string> {
    const body = new URLSearchParams({ grant_type: 'client_credentials', resource })
    if (scope !== undefined) body.set('scope', Array.isArray(scope) ? scope.join(' ') : scope)
    // RFC 6749 §2.3.1: the client id and secret are form-urlencoded before they are joined.
    const credentials = `${encodeURIComponent(client.clientId)}:${encodeURIComponent(client.clientSecret)}`
    const response = await fetch(this.tokenEndpoint, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(credentials).toString('base64')}`, accept: 'application/json' },
      body
    })
    const text = await response.text()
    if (!response.ok) {
      const cause = response.status >= 500 && this.#serverError !== undefined ? ` (the provider's error: ${this.#serverError.message})` : ''
      throw new Error(`the authorization server refused the token request with ${response.status}: ${text}${cause}`)
    }
    const accessToken = (JSON.parse(text) as { access_token?: unknown }).access_token
    if (typeof accessToken !== 'string') throw new Error(`the token response has no access_token: ${text}`)
    return accessToken
  }

  async rotateKeys ({ keepOld }: { keepOld: boolean }): Promise<SigningKey> {
    const key = await generateSigningKey(this.#options.algorithm)
    this.#keys = keepOld ? [key, ...this.#keys] : [key]
    this.#listener = this.#provider().callback()
    return key
  }

  async stop (): Promise<void> {
    if (!this.#server.listening) return
    const closed = new Promise<void>(resolve => { this.#server.close(() => { resolve() }) })
    this.#server.closeAllConnections()
    await closed
  }

  async start (): Promise<void> {
    if (this.#server.listening) return
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject)
      this.#server.listen({ host: '127.0.0.1', port: this.port }, () => {
        this.#server.off('error', reject)
        resolve()
      })
    })
  }

  /** A provider for the current keys; oidc-provider takes its keys at construction only. */
  #provider (): Provider {
    const { default: OidcProvider, errors } = this.#module
    const { resources, opaqueResources, scopes, accessTokenTtlSeconds, algorithm } = this.#options
    const scope = scopes.join(' ')
    const configuration = {
      clients: this.clients.map(({ clientId, clientSecret }) => ({
        client_id: clientId,
        client_secret: clientSecret,
        grant_types: ['client_credentials'],
        response_types: [],
        redirect_uris: [],
        token_endpoint_auth_method: 'client_secret_basic',
        scope
      })),
      // The default (RS256) needs an RSA key in the key set: a client whose key set has none fails
      // validation with invalid_client_metadata.
      clientDefaults: { id_token_signed_response_alg: algorithm },
      jwks: { keys: this.#keys.map(key => key.privateJwk) },
      scopes,
      routes: { jwks: JWKS_ROUTE, token: TOKEN_ROUTE, introspection: INTROSPECTION_ROUTE },
      ttl: { AccessToken: accessTokenTtlSeconds, ClientCredentials: accessTokenTtlSeconds },
      features: {
        devInteractions: { enabled: false },
        clientCredentials: { enabled: true },
        introspection: { enabled: true },
        resourceIndicators: {
          enabled: true,
          defaultResource: async () => undefined,
          useGrantedResource: async () => true,
          getResourceServerInfo: async (_ctx: unknown, resource: string) => {
            if (!resources.includes(resource)) throw new errors.InvalidTarget()
            return {
              scope,
              audience: resource,
              accessTokenTTL: accessTokenTtlSeconds,
              accessTokenFormat: opaqueResources.includes(resource) ? 'opaque' : 'jwt',
              jwt: { sign: { alg: algorithm } }
            }
          }
        }
      }
    }
    const release = silenceProviderNotices()
    try {
      return new OidcProvider(this.issuer, configuration)
        .on('server_error', (_ctx, error) => { this.#serverError = error })
    } finally {
      release()
    }
  }

  #handle (req: IncomingMessage, res: ServerResponse): void {
    const method = req.method ?? 'GET'
    const url = req.url ?? '/'
    this.requests.push({ method, path: url })
    const pathname = url.split('?', 1)[0]!
    const local = this.#local(pathname)
    if (method === 'GET' && local === JWKS_ROUTE) {
      this.jwksRequests++
      if (this.jwksFault !== undefined) {
        this.#misbehave(this.jwksFault, res)
        return
      }
      if (this.jwksCacheControl !== undefined) res.setHeader('cache-control', this.jwksCacheControl)
    }
    if (method === 'POST' && local === TOKEN_ROUTE) this.tokenRequests++
    if (method === 'POST' && local === INTROSPECTION_ROUTE) this.introspectionRequests++
    const forward = this.#forward(pathname, url.slice(pathname.length))
    if (forward === undefined) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not_found"}')
      return
    }
    // The provider routes paths relative to its mount point, which it finds from `req.originalUrl`
    // (node_modules/oidc-provider/lib/helpers/oidc_context.js, urlFor).
    Object.assign(req, { originalUrl: forward, url: forward.slice(this.#options.path.length) })
    void this.#listener(req, res)
  }

  /** `pathname` relative to the issuer's path, or undefined when it is outside it. */
  #local (pathname: string): string | undefined {
    const { path } = this.#options
    return path === '' || pathname.startsWith(`${path}/`) ? pathname.slice(path.length) : undefined
  }

  /**
   * The URL (under the issuer's path) the provider answers a request for `pathname` with, or
   * undefined for a 404; counts the discovery documents served.
   */
  #forward (pathname: string, query: string): string | undefined {
    const { path, metadata } = this.#options
    // RFC 8414 §3.1: an issuer's path goes after the well-known prefix (the provider itself serves
    // the document under the issuer's path, which RFC 8414 does not define: not served there).
    if (pathname === `${OAUTH_METADATA}${path}`) {
      if (!metadata.includes('oauth-authorization-server')) return undefined
      this.discoveryRequests++
      return `${path}${OAUTH_METADATA}${query}`
    }
    const local = this.#local(pathname)
    if (local === undefined || local === OAUTH_METADATA) return undefined
    if (local === OPENID_METADATA) {
      if (!metadata.includes('openid-configuration')) return undefined
      this.discoveryRequests++
    }
    return `${pathname}${query}`
  }

  #misbehave (fault: JwksFault, res: ServerResponse): void {
    switch (fault) {
      case '500':
        res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"server_error"}')
        break
      case 'garbage':
        res.writeHead(200, { 'content-type': 'application/jwk-set+json' }).end('<html>this is not a key set</html>')
        break
      case 'huge':
        // The real keys in valid JSON, padded past 10 MB and sent chunked (no Content-Length): only
        // a bound on what is read refuses it.
        res.writeHead(200, { 'content-type': 'application/jwk-set+json' })
        void pipeline(Readable.from(this.#hugeJwks()), res).catch(() => {})
        break
      case 'hang':
        // No answer; stop() and the teardown drop the connection.
        break
      case 'not-keys':
        res.writeHead(200, { 'content-type': 'application/jwk-set+json' }).end('{"keys":[1,"two",null]}')
        break
      case 'bad-keys':
        res.writeHead(200, { 'content-type': 'application/jwk-set+json' })
          .end(JSON.stringify({ keys: this.#keys.map(({ publicJwk }) => ({ ...publicJwk, ...(publicJwk.kty === 'RSA' ? { n: 'AAAA' } : { x: 'AAAA', y: 'AAAA' }) })) }))
        break
    }
  }

  * #hugeJwks (): Generator<string> {
    yield `{"keys":${JSON.stringify(this.#keys.map(key => key.publicJwk))},"padding":"`
    const chunk = 'x'.repeat(64 * 1024)
    for (let sent = 0; sent < HUGE_JWKS_BYTES; sent += chunk.length) yield chunk
    yield '"}'
  }
}

/**
 * Starts an authorization server on a free loopback port (below the ephemeral range, so that while
 * it is stopped no client socket can take the port: see test/helpers/redis-server.ts) and stops it
 * in `t`'s teardown.
 */
export async function startAuthorizationServer (t: Teardown, options: AuthorizationServerOptions): Promise<AuthorizationServer> {
  const path = options.path ?? ''
  if (path !== '' && (!path.startsWith('/') || path.endsWith('/'))) throw new Error(`path must start with / and not end with one: ${path}`)
  const settings: Required<AuthorizationServerOptions> = {
    resources: options.resources,
    opaqueResources: options.opaqueResources ?? [],
    scopes: options.scopes,
    accessTokenTtlSeconds: options.accessTokenTtlSeconds ?? 300,
    path,
    algorithm: options.algorithm ?? 'ES256',
    clients: options.clients ?? 2,
    metadata: options.metadata ?? ['oauth-authorization-server', 'openid-configuration']
  }
  const [module, port, key] = await Promise.all([loadProvider(), freePort(), generateSigningKey(settings.algorithm)])
  const server = new TestAuthorizationServer(module, settings, port, key)
  t.teardown(async () => { await server.stop() })
  await server.start()
  return server
}
