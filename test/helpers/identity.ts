/**
 * Helpers for the identity and hostile-input tests: a tool that reports who the server thinks is
 * calling, a counting tool (did anything reach a handler?), apps with `@fastify/jwt`, JSON-RPC shape
 * checks, and a raw TCP exchange for requests `fetch` and `inject` refuse to send.
 */
import { connect } from 'node:net'
import type { AddressInfo } from 'node:net'
import fastifyJwt from '@fastify/jwt'
import Fastify, { type FastifyInstance, type LightMyRequestResponse } from 'fastify'
import mcpCancellation, { type McpCancellationOptions } from '../../lib/index.js'
import { SERVER_INFO, type Teardown } from './mcp.js'

/** A JWT secret of comfortable length for HS256. */
export const JWT_SECRET = 'jwt-secret-of-the-identity-tests-0123456789'
/** A session secret of exactly 32 bytes, the minimum. */
export const SESSION_SECRET = 's'.repeat(32)

/** What the `whoami` tool saw of its request. */
export interface Whoami {
  principal: string | null
  requestPrincipal: string | null
  sessionId: string | null
  scope: string | null
}

/** Registers `whoami`: returns `ctx.principal`, `request.mcpPrincipal`, `request.mcpSessionId` and `request.mcpScope` as JSON text. */
export function whoamiTool (app: FastifyInstance): void {
  app.mcp.tool({
    name: 'whoami',
    description: 'Reports the identity the server resolved for this request',
    inputSchema: { type: 'object' },
    handler: (_args, ctx) => {
      const seen: Whoami = {
        principal: ctx.principal,
        requestPrincipal: ctx.request.mcpPrincipal,
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

/** Counts the calls that reached a handler. */
export interface Counter {
  calls: number
}

/** Registers `count` (accepts any arguments, counts its calls) and returns the counter. */
export function counterTool (app: FastifyInstance, name = 'count'): Counter {
  const counter: Counter = { calls: 0 }
  app.mcp.tool({
    name,
    description: 'Counts its calls',
    inputSchema: { type: 'object' },
    handler: () => {
      counter.calls++
      return { content: [{ type: 'text', text: `call ${counter.calls}` }] }
    }
  })
  return counter
}

/** A legacy `tools/call` body. */
export function callTool (name: string, args: Record<string, unknown> = {}, id: string | number = 1): Record<string, unknown> {
  return { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } }
}

/** A legacy `initialize` body. */
export function initializeBody (id: string | number = 1): Record<string, unknown> {
  return {
    jsonrpc: '2.0',
    id,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'tap-client', version: '1.0.0' } }
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
  whoamiTool(app)
  const counter = counterTool(app)
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

/** What is wrong with a JSON-RPC response object, or undefined when it is well formed. */
export function jsonRpcResponseViolation (message: unknown): string | undefined {
  if (typeof message !== 'object' || message === null || Array.isArray(message)) return 'not an object'
  const m = message as Record<string, unknown>
  if (m.jsonrpc !== '2.0') return `jsonrpc is ${JSON.stringify(m.jsonrpc)}`
  const hasResult = 'result' in m
  const hasError = 'error' in m
  if (hasResult === hasError) return 'not exactly one of result and error'
  if ('id' in m && typeof m.id !== 'string' && typeof m.id !== 'number') return `id is ${JSON.stringify(m.id)}`
  if (hasError) {
    const error = m.error as Record<string, unknown> | null
    if (typeof error !== 'object' || error === null) return 'error is not an object'
    if (!Number.isInteger(error.code)) return `error.code is ${JSON.stringify(error.code)}`
    if (typeof error.message !== 'string') return 'error.message is not a string'
  }
  return undefined
}

export interface BareError {
  code: number
  message: string
  data?: unknown
}

/**
 * The error of a transport-level rejection: a well-formed JSON-RPC error response without an id.
 * Throws (with the payload) when the body is anything else, so a test fails with the evidence.
 */
export function bareError (response: LightMyRequestResponse | { payload: string }): BareError {
  const body = JSON.parse(response.payload) as Record<string, unknown>
  const violation = jsonRpcResponseViolation(body)
  if (violation !== undefined) throw new Error(`not a JSON-RPC response (${violation}): ${response.payload.slice(0, 300)}`)
  if (!('error' in body)) throw new Error(`not an error: ${response.payload.slice(0, 300)}`)
  if ('id' in body) throw new Error(`carries an id: ${response.payload.slice(0, 300)}`)
  return body.error as BareError
}

/** A listening app's port. */
export function portOf (app: FastifyInstance): number {
  return (app.server.address() as AddressInfo).port
}

/**
 * Writes `request` (raw bytes, exactly as given) to a fresh TCP connection and collects what comes
 * back until one whole response (by Content-Length) has arrived, the server closes the connection, or
 * `waitMs` passes; then the socket is destroyed. For requests that
 * `fetch` and `inject` refuse to send: control characters in header values, bodies shorter than their
 * Content-Length.
 */
export async function rawExchange (port: number, request: string | Buffer, waitMs = 1000): Promise<string> {
  return await new Promise(resolve => {
    const socket = connect(port, '127.0.0.1')
    const chunks: Buffer[] = []
    let settled = false
    const finish = (): void => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      socket.destroy()
      resolve(Buffer.concat(chunks).toString('latin1'))
    }
    const timer = setTimeout(finish, waitMs)
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk)
      if (completeResponse(Buffer.concat(chunks).toString('latin1'))) finish()
    })
    socket.on('close', finish)
    socket.on('error', finish)
    socket.write(request)
  })
}

/** The status code of a raw HTTP/1.1 response, or undefined when nothing parseable came back. */
export function rawStatus (response: string): number | undefined {
  const match = /^HTTP\/1\.1 (\d{3}) /.exec(response)
  return match === null ? undefined : Number(match[1])
}

/** The body of a raw HTTP/1.1 response (after the blank line). */
export function rawBody (response: string): string {
  const end = response.indexOf('\r\n\r\n')
  return end === -1 ? '' : response.slice(end + 4)
}

/** True once `text` holds a status line, headers and as many body bytes as Content-Length announces. */
function completeResponse (text: string): boolean {
  const end = text.indexOf('\r\n\r\n')
  if (end === -1) return false
  const length = /\r\ncontent-length:\s*(\d+)/i.exec(text.slice(0, end))
  return length !== null && text.length - end - 4 >= Number(length[1])
}
