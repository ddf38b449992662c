/**
 * What the server did, recorded on its side: every exchange with the MCP endpoint as it crossed the
 * wire (era headers, request body, JSON answers), each response's writes and close by JSON-RPC id, and
 * the `mcp:request:cancelled` events it published.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel'
import type { FastifyInstance } from 'fastify'
import type { RequestCancelledEvent } from '../../lib/index.js'
import type { Chunk } from './http.js'
import type { Teardown } from './teardown.js'

export interface WireExchange {
  method: string
  protocolVersion: string | undefined
  mcpMethod: string | undefined
  mcpName: string | undefined
  /** The JSON-RPC method of the request body, when it parses as one message. */
  rpcMethod: string | undefined
  requestBody: string
  statusCode: number | undefined
  /** The response body when it was JSON (SSE answers are recorded with their status only). */
  responseBody: string | undefined
}

const header = (value: string | string[] | undefined): string | undefined => Array.isArray(value) ? value.join(', ') : value

/**
 * Records every exchange with the MCP endpoint (`/mcp`), in arrival order, so a test can assert what
 * crossed the wire and quote it when a client rejects a result. Call before the app is ready.
 */
export function recordWire (app: FastifyInstance): WireExchange[] {
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
  return wire
}

/** The most recent exchange whose JSON-RPC method is `rpcMethod`. */
export function lastExchange (wire: readonly WireExchange[], rpcMethod: string): WireExchange | undefined {
  return wire.findLast(exchange => exchange.rpcMethod === rpcMethod)
}

/** What the server did with its response to one JSON-RPC request. */
export interface ResponseRecord {
  /** When `reply.raw` emitted 'close'. */
  closedAt: number | undefined
  /** `reply.raw.writableFinished` at 'close': false means the client left before the response ended. */
  finished: boolean | undefined
  /** Every `reply.raw.write` (body chunks as the server wrote them, SSE events one by one) with its time. */
  writes: Chunk[]
}

/**
 * Records, by the JSON-RPC id of the request body, each MCP POST's response: its 'close' (listener added
 * in onRequest, so it runs before the endpoint's own, armed in the handler: its time is the moment the
 * server learnt that the response closed) and its writes, timed on the server side.
 */
export function recordResponses (app: FastifyInstance): Map<unknown, ResponseRecord> {
  const byId = new Map<unknown, ResponseRecord>()
  const byRequest = new WeakMap<object, ResponseRecord>()
  app.addHook('onRequest', async (request, reply) => {
    const record: ResponseRecord = { closedAt: undefined, finished: undefined, writes: [] }
    byRequest.set(request, record)
    const response = reply.raw
    response.once('close', () => {
      record.closedAt = Date.now()
      record.finished = response.writableFinished
    })
    const write = response.write.bind(response) as (...args: unknown[]) => boolean
    response.write = ((chunk: unknown, ...rest: unknown[]) => {
      record.writes.push({ at: Date.now(), text: Buffer.isBuffer(chunk) ? chunk.toString('utf8') : String(chunk) })
      return write(chunk, ...rest)
    }) as typeof response.write
  })
  app.addHook('preHandler', async request => {
    const record = byRequest.get(request)
    if (record === undefined || !Buffer.isBuffer(request.body)) return
    try {
      const body = JSON.parse(request.body.toString('utf8')) as { id?: unknown }
      if (body.id !== undefined) byId.set(body.id, record)
    } catch {}
  })
  return byId
}

/** A `mcp:request:cancelled` event and when it was published (the moment the server cancelled). */
export interface CancellationEvent extends RequestCancelledEvent {
  at: number
}

/** Every `mcp:request:cancelled` event published until the end of the test. */
export function cancellationEvents (t: Teardown): CancellationEvent[] {
  const events: CancellationEvent[] = []
  const listener = (message: unknown): void => {
    const { requestId, scope, reason, source } = message as RequestCancelledEvent
    events.push({ requestId, scope, reason, source, at: Date.now() })
  }
  subscribe('mcp:request:cancelled', listener)
  t.teardown(() => { unsubscribe('mcp:request:cancelled', listener) })
  return events
}
