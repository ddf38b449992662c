/**
 * A small client of the 2026-07-28 tasks extension (`io.modelcontextprotocol/tasks`) for the task
 * tests: the same calls over `fastify.inject` or over a real socket (fetch), with the modern headers
 * (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` = params.name / params.taskId) and `_meta`.
 */
import type { FastifyInstance } from 'fastify'
import { setTimeout as sleep } from 'node:timers/promises'
import { post } from './inject.js'
import { DEFAULT_HEADERS, META, modernHeaders, modernMeta, type Headers, type JsonRpcMessage } from './jsonrpc.js'

export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks'

/** Client capabilities declaring the tasks extension (and elicitation, which the asking tools need). */
export const WITH_TASKS: Record<string, unknown> = { elicitation: {}, extensions: { [TASKS_EXTENSION]: {} } }
/** Client capabilities without the extension. */
export const WITHOUT_TASKS: Record<string, unknown> = { elicitation: {} }

export interface SendOptions {
  /** The request's `_meta` client capabilities. Default `WITH_TASKS`. */
  capabilities?: Record<string, unknown>
  /** Extra headers (`undefined` drops one, e.g. `'mcp-name': undefined`). */
  headers?: Headers
  id?: unknown
}

export interface RpcAnswer {
  status: number
  body: JsonRpcMessage
}

/** Sends one modern JSON-RPC request and reads its answer (a JSON body). */
export type Send = (method: string, params: Record<string, unknown>, options?: SendOptions) => Promise<RpcAnswer>

/** What a modern request carries: its body and its headers (Mcp-Name mirrors params.name or params.taskId when a string). */
function modernRequest (method: string, params: Record<string, unknown>, options: SendOptions): { body: unknown, headers: Headers } {
  const mirrored = method === 'tools/call' ? params.name : method.startsWith('tasks/') ? params.taskId : undefined
  const body = {
    jsonrpc: '2.0',
    id: 'id' in options ? options.id : 1,
    method,
    params: { ...params, _meta: modernMeta({ [META.clientCapabilities]: options.capabilities ?? WITH_TASKS }) }
  }
  return { body, headers: { ...modernHeaders(method, typeof mirrored === 'string' ? mirrored : undefined), ...options.headers } }
}

/** A `Send` over `fastify.inject`. */
export function injectSender (app: FastifyInstance): Send {
  return async (method, params, options = {}) => {
    const { body, headers } = modernRequest(method, params, options)
    const response = await post(app, body, headers)
    return { status: response.statusCode, body: JSON.parse(response.payload) as JsonRpcMessage }
  }
}

/** A `Send` over a real socket (fetch, JSON answers). */
export function fetchSender (url: URL): Send {
  return async (method, params, options = {}) => {
    const { body, headers } = modernRequest(method, params, options)
    const sent: Record<string, string> = { ...DEFAULT_HEADERS }
    for (const [key, value] of Object.entries(headers)) if (value !== undefined) sent[key] = value
    const response = await fetch(url, { method: 'POST', headers: sent, body: JSON.stringify(body) })
    return { status: response.status, body: JSON.parse(await response.text()) as JsonRpcMessage }
  }
}

/** `tools/call`, `tasks/get`, `tasks/update` and `tasks/cancel` over a `Send`. */
export class TaskClient {
  readonly send: Send

  constructor (send: Send) {
    this.send = send
  }

  async call (name: string, args: Record<string, unknown> = {}, options: SendOptions = {}): Promise<RpcAnswer> {
    return await this.send('tools/call', { name, arguments: args }, options)
  }

  /** Calls a task tool and returns the task id of its CreateTaskResult (throws when the answer is not one). */
  async create (name: string, args: Record<string, unknown> = {}, options: SendOptions = {}): Promise<string> {
    const answer = await this.call(name, args, options)
    const taskId: unknown = answer.body.result?.taskId
    if (answer.body.result?.resultType !== 'task' || typeof taskId !== 'string') {
      throw new Error(`${name} did not become a task: HTTP ${answer.status} ${JSON.stringify(answer.body)}`)
    }
    return taskId
  }

  async get (taskId: string, options: SendOptions = {}): Promise<RpcAnswer> {
    return await this.send('tasks/get', { taskId }, options)
  }

  async update (taskId: string, inputResponses: unknown, options: SendOptions = {}): Promise<RpcAnswer> {
    return await this.send('tasks/update', { taskId, inputResponses }, options)
  }

  async cancel (taskId: string, options: SendOptions = {}): Promise<RpcAnswer> {
    return await this.send('tasks/cancel', { taskId }, options)
  }

  /** The task's `tasks/get` result once its status is one of `statuses` (every 10 ms), or the last one seen after `timeoutMs`. */
  async waitFor (taskId: string, statuses: readonly string[], timeoutMs = 3000, options: SendOptions = {}): Promise<Record<string, any> | undefined> {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const result = (await this.get(taskId, options)).body.result as Record<string, any> | undefined
      if (result === undefined || statuses.includes(String(result.status)) || Date.now() >= deadline) return result
      await sleep(10)
    }
  }
}

/** A promise with its resolve function, for tools the test lets finish. */
export class Gate {
  readonly promise: Promise<void>
  open!: () => void

  constructor () {
    this.promise = new Promise<void>(resolve => { this.open = resolve })
  }
}

/** True for an ISO 8601 UTC timestamp as `Date#toISOString` writes it. */
export function isIsoDate (value: unknown): boolean {
  return typeof value === 'string' && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/.test(value) && new Date(value).toISOString() === value
}
