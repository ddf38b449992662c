/**
 * Starts the demo server (example/app.ts) on a real socket for black-box tests against the official
 * MCP clients. Records, per HTTP request to the MCP endpoint, the era headers, the request body and
 * (for JSON answers) the response body, so a test can assert what crossed the wire and quote it when a
 * client rejects a result. SSE answers are recorded with their status only.
 */
import type { AddressInfo } from 'node:net'
import type { FastifyInstance, FastifyServerOptions } from 'fastify'
import { buildApp, type DemoEnv } from '../../example/app.js'

export interface WireExchange {
  method: string
  protocolVersion: string | undefined
  mcpMethod: string | undefined
  mcpName: string | undefined
  /** The JSON-RPC method of the request body, when it parses as one message. */
  rpcMethod: string | undefined
  requestBody: string
  statusCode: number | undefined
  responseBody: string | undefined
}

export interface ListeningDemo {
  app: FastifyInstance
  url: URL
  /** Every exchange with the MCP endpoint, in arrival order. */
  wire: WireExchange[]
}

const header = (value: string | string[] | undefined): string | undefined => Array.isArray(value) ? value.join(', ') : value

export async function listenDemo (env: DemoEnv = {}, fastifyOptions: FastifyServerOptions = {}): Promise<ListeningDemo> {
  const app = await buildApp(env, fastifyOptions)
  const wire: WireExchange[] = []
  const byRequest = new WeakMap<object, WireExchange>()

  app.addHook('preHandler', async request => {
    if (request.url !== '/mcp') return
    const raw = Buffer.isBuffer(request.body) ? request.body.toString('utf8') : ''
    let rpcMethod: string | undefined
    try {
      const parsed: unknown = JSON.parse(raw)
      if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) && typeof (parsed as { method?: unknown }).method === 'string') {
        rpcMethod = (parsed as { method: string }).method
      }
    } catch {}
    const exchange: WireExchange = {
      method: request.method,
      protocolVersion: header(request.headers['mcp-protocol-version']),
      mcpMethod: header(request.headers['mcp-method']),
      mcpName: header(request.headers['mcp-name']),
      rpcMethod,
      requestBody: raw,
      statusCode: undefined,
      responseBody: undefined
    }
    wire.push(exchange)
    byRequest.set(request, exchange)
  })
  app.addHook('onSend', async (request, reply, payload) => {
    const exchange = byRequest.get(request)
    if (exchange !== undefined) {
      exchange.statusCode = reply.statusCode
      if (typeof payload === 'string' || Buffer.isBuffer(payload)) exchange.responseBody = payload.toString()
    }
    return payload
  })

  await app.listen({ host: '127.0.0.1', port: 0 })
  const { port } = app.server.address() as AddressInfo
  return { app, url: new URL(`http://127.0.0.1:${port}/mcp`), wire }
}

/** The most recent exchange whose JSON-RPC method is `rpcMethod`. */
export function lastExchange (wire: readonly WireExchange[], rpcMethod: string): WireExchange | undefined {
  return wire.findLast(exchange => exchange.rpcMethod === rpcMethod)
}
