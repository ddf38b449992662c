/**
 * Identity for the principal, session and scope tests: a tool that reports who the server thinks is
 * calling, apps with `@fastify/jwt`, and bearer tokens good and bad.
 */
import fastifyJwt from '@fastify/jwt'
import Fastify, { type FastifyInstance, type LightMyRequestResponse } from 'fastify'
import mcpCancellation, { type McpCancellationOptions } from '../../lib/index.js'
import { SERVER_INFO } from './inject.js'
import type { Teardown } from './teardown.js'
import { registerCounter, type Counter } from './tools.js'

/** A JWT secret of comfortable length for HS256. */
export const JWT_SECRET = 'jwt-secret-of-the-identity-tests-0123456789'
/** A session secret of exactly 32 bytes, the minimum. */
export const SESSION_SECRET = 's'.repeat(32)

/** What the `whoami` tool saw of its request (the principals by id). */
export interface Whoami {
  principal: string | null
  requestPrincipal: string | null
  sessionId: string | null
  scope: string | null
}

/** Registers `whoami`: returns `ctx.principal`, `request.mcpPrincipal`, `request.mcpSessionId` and `request.mcpScope` as JSON text. */
export function registerWhoami (app: FastifyInstance): void {
  app.mcp.tool({
    name: 'whoami',
    description: 'Reports the identity the server resolved for this request',
    inputSchema: { type: 'object' },
    handler: (_args, ctx) => {
      const seen: Whoami = {
        principal: ctx.principal?.id ?? null,
        requestPrincipal: ctx.request.mcpPrincipal?.id ?? null,
        sessionId: ctx.request.mcpSessionId,
        scope: ctx.request.mcpScope
      }
      return { content: [{ type: 'text', text: JSON.stringify(seen) }] }
    }
  })
}

/** The identity a `whoami` call reported, or undefined when the response is not its result. */
export function whoamiOf (response: LightMyRequestResponse): Whoami | undefined {
  if (response.statusCode !== 200) return undefined
  try {
    const body = JSON.parse(response.payload) as { result?: { content?: Array<{ text?: string }> } }
    const text = body.result?.content?.[0]?.text
    return text === undefined ? undefined : JSON.parse(text) as Whoami
  } catch {
    return undefined
  }
}

export interface JwtAppOptions {
  /** Options of the plugin (`auth` defaults to `{ jwt: true, principalClaim: 'sub', required: true }`). */
  plugin?: McpCancellationOptions
  /** Options of `@fastify/jwt` (the secret defaults to JWT_SECRET). */
  jwt?: Record<string, unknown>
}

export interface JwtApp {
  app: FastifyInstance
  counter: Counter
}

/** A fresh app with `@fastify/jwt`, the plugin, `whoami` and `count`, ready, closed at the end of the test. */
export async function jwtApp (t: Teardown, options: JwtAppOptions = {}): Promise<JwtApp> {
  const app = Fastify({ logger: false })
  t.teardown(() => app.close())
  await app.register(fastifyJwt, { secret: JWT_SECRET, ...options.jwt } as Parameters<typeof fastifyJwt>[1])
  await app.register(mcpCancellation, {
    serverInfo: SERVER_INFO,
    auth: { jwt: true, principalClaim: 'sub', required: true },
    ...options.plugin
  })
  registerWhoami(app)
  const counter = registerCounter(app)
  await app.ready()
  return { app, counter }
}

/** An app with `@fastify/jwt` under another secret: signs tokens the app under test must refuse. */
export async function foreignSigner (t: Teardown, secret = 'another-secret-nobody-trusts-0123456789'): Promise<FastifyInstance> {
  const other = Fastify({ logger: false })
  t.teardown(() => other.close())
  await other.register(fastifyJwt, { secret })
  await other.ready()
  return other
}

/** `Authorization: Bearer <token>`. */
export function bearer (token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` }
}

/** An unsigned (`alg: none`) token carrying `payload`. */
export function unsignedToken (payload: Record<string, unknown>): string {
  const part = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url')
  return `${part({ alg: 'none', typ: 'JWT' })}.${part(payload)}.`
}
