/**
 * Several plugin nodes sharing one Redis, for the multi-node tests: a node is the bare plugin on
 * 127.0.0.1:0 with the probe, the demo's `sleep` and `echo`, logging into memory; helpers start a long
 * probe call on one node and cancel it through another, and flood a node with cancels.
 */
import http from 'node:http'
import type { FastifyInstance, FastifyServerOptions } from 'fastify'
import type { McpCancellationOptions } from '../../lib/index.js'
import { openPost, rawPost, type OpenPost, type RawResponse } from './http.js'
import { cancelNotification, LEGACY_HEADERS, toolCall } from './jsonrpc.js'
import { listenPlugin, type Listening } from './listen.js'
import { captureLogs } from './logs.js'
import type { Teardown } from './teardown.js'
import { registerEcho, type ProbeCall } from './tools.js'
import { waitFor } from './wait.js'

export interface Node extends Listening {
  name: string
  /** The lines this node logged at `warn` and above. */
  logs: () => Array<Record<string, unknown>>
}

/**
 * The plugin with `options`, `echo` and whatever `setup` adds, on 127.0.0.1:0 (see `listenPlugin`),
 * logging `warn` and above into memory; closed at the end of the test.
 */
export async function startNode (t: Teardown, name: string, options: McpCancellationOptions,
  fastifyOptions: FastifyServerOptions = {}, setup?: (app: FastifyInstance) => void): Promise<Node> {
  const logs = captureLogs('warn')
  const listening = await listenPlugin(t, { serverInfo: { name, version: '1.0.0' }, ...options }, { ...logs.options, ...fastifyOptions },
    app => {
      registerEcho(app)
      setup?.(app)
    })
  return { ...listening, name, logs: logs.lines }
}

/** A legacy `tools/call echo`; resolves to the HTTP status and the echoed text (undefined unless a proper result). */
export async function echo (node: Listening, text: string, headers: Record<string, string> = {}): Promise<{ status: number, text: string | undefined }> {
  let response: RawResponse
  try {
    response = await rawPost(node.url, toolCall(`echo-${text}`, 'echo', { text }), headers)
  } catch (error) {
    return { status: 0, text: `request failed: ${String(error)}` }
  }
  let echoed: string | undefined
  try {
    const body = JSON.parse(response.text) as { result?: { content?: Array<{ text?: string }> } }
    echoed = body.result?.content?.[0]?.text
  } catch {}
  return { status: response.status, text: echoed }
}

export interface RunningProbe {
  id: string | number
  http: OpenPost
  /** What the probe tool saw, once it started. */
  call: () => ProbeCall | undefined
}

let probes = 0

/**
 * Starts `probe {ms}` on `node` (a legacy JSON call over its own connection) and waits until the tool
 * runs. The tag is unique, so the probe's record is found whatever id the call reuses.
 */
export async function startProbe (node: Listening, ms: number, options: { id?: string | number, headers?: Record<string, string> } = {}): Promise<RunningProbe> {
  const tag = `probe-${++probes}`
  const id = options.id ?? tag
  const http = openPost(node.url, toolCall(id, 'probe', { ms, tag }), options.headers)
  const call = (): ProbeCall | undefined => node.probe.tagged(tag)[0]
  if (!await waitFor(() => call() !== undefined, 3000)) throw new Error(`probe ${String(id)} did not start on ${node.url.host}`)
  return { id, http, call }
}

/** POSTs `notifications/cancelled` for `id` to `node`; resolves to the HTTP status. */
export async function sendCancel (node: Listening, id: string | number, reason: string, headers: Record<string, string> = {}): Promise<number> {
  return (await rawPost(node.url, cancelNotification(id, reason), headers)).status
}

/**
 * One cross-node attempt: a fresh long probe on `owner`, its cancel POSTed to `via`; true when the
 * probe's signal fired within `waitMs`. A probe that was not cancelled is ended by disconnecting it.
 */
export async function crossNodeCancelWorks (owner: Listening, via: Listening, waitMs: number, headers: Record<string, string> = {}): Promise<boolean> {
  const probe = await startProbe(owner, 30_000, { headers })
  await sendCancel(via, probe.id, 'cross-node check', headers)
  const aborted = await waitFor(() => probe.call()?.abortedAt !== undefined, waitMs)
  if (!aborted) probe.http.destroy()
  await probe.http.done.catch(() => {})
  return aborted
}

/**
 * Tries a cross-node cancel every `everyMs` (each attempt waits that long for the abort) until one
 * works; resolves to the milliseconds from `since` to the abort, or undefined after `timeoutMs`.
 */
export async function untilCrossNodeWorks (owner: Listening, via: Listening, since: number, timeoutMs: number,
  options: { everyMs?: number, headers?: Record<string, string> } = {}): Promise<number | undefined> {
  while (Date.now() - since < timeoutMs) {
    if (await crossNodeCancelWorks(owner, via, options.everyMs ?? 250, options.headers)) return Date.now() - since
  }
  return undefined
}

/** Nothing in flight and no cancellation row left on any of `apps`. */
export async function drained (apps: readonly FastifyInstance[], timeoutMs = 2000): Promise<boolean> {
  return await waitFor(() => apps.every(app => app.mcpCancellation.inFlightRows === 0 && app.mcpCancellation.rows === 0), timeoutMs)
}

/**
 * POSTs one `notifications/cancelled` per id to `node`, `concurrency` at a time over keep-alive
 * connections (node:http: a flood through `fetch` costs several times the CPU), calling `afterBatch`
 * between batches; resolves to the count of each HTTP status.
 */
export async function cancelFlood (node: Listening, ids: ReadonlyArray<string | number>, concurrency: number,
  afterBatch: () => void = () => {}): Promise<Record<number, number>> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency })
  const post = async (id: string | number): Promise<number> => {
    const payload = JSON.stringify(cancelNotification(id, 'flood'))
    return await new Promise(resolve => {
      const request = http.request(node.url, {
        method: 'POST', agent, headers: { ...LEGACY_HEADERS, 'content-length': String(Buffer.byteLength(payload)) }
      }, response => {
        response.resume()
        response.on('end', () => { resolve(response.statusCode ?? 0) })
        response.on('error', () => { resolve(0) })
      })
      request.on('error', () => { resolve(0) })
      request.end(payload)
    })
  }
  const statuses: Record<number, number> = {}
  try {
    for (let at = 0; at < ids.length; at += concurrency) {
      for (const status of await Promise.all(ids.slice(at, at + concurrency).map(post))) statuses[status] = (statuses[status] ?? 0) + 1
      afterBatch()
    }
  } finally {
    agent.destroy()
  }
  return statuses
}
