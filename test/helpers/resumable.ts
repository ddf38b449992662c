/**
 * Resumable legacy streams (2025-11-25) as a client sees them: every SSE field of an event (its `id`
 * and `retry` as well as its data), tools whose streams last long enough to be cut and resumed, each
 * recording when and why its `ctx.signal` aborted, a resume (`GET` with `Last-Event-ID`), and the SDK
 * 1.x client with every HTTP request it makes recorded.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { FastifyInstance } from 'fastify'
import { RequestCancelledError } from '../../lib/index.js'
import type { StreamConnection } from '../../lib/transport/resumable-stream.js'
import { EventStream } from './event-stream.js'
import { attempt, type Outcome } from './mcp-results.js'
import { waitFor } from './wait.js'
import { LEGACY, type JsonRpcMessage } from './jsonrpc.js'
import type { Teardown } from './teardown.js'

/** One SSE event, every field of it (`data` lines joined by newlines, as a parser does). */
export interface SseEvent {
  id: string | undefined
  retry: number | undefined
  event: string | undefined
  data: string
}

/** The events of an SSE body received whole so far (blocks holding only comments, such as keep-alives, left out). */
export function sseEvents (body: string): SseEvent[] {
  const whole = body.slice(0, body.lastIndexOf('\n\n') + 2)
  const events: SseEvent[] = []
  for (const block of whole.split('\n\n')) {
    const fields = block.split('\n').filter(line => line !== '' && !line.startsWith(':'))
    if (fields.length === 0) continue
    const event: SseEvent = { id: undefined, retry: undefined, event: undefined, data: '' }
    const data: string[] = []
    for (const line of fields) {
      const colon = line.indexOf(':')
      const name = colon === -1 ? line : line.slice(0, colon)
      const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '')
      if (name === 'id') event.id = value
      else if (name === 'retry') event.retry = Number(value)
      else if (name === 'event') event.event = value
      else if (name === 'data') data.push(value)
    }
    event.data = data.join('\n')
    events.push(event)
  }
  return events
}

/** The JSON-RPC messages of `events` (events without data, such as a priming one, left out). */
export function messagesOf (events: readonly SseEvent[]): JsonRpcMessage[] {
  return events.filter(event => event.data !== '').map(event => JSON.parse(event.data) as JsonRpcMessage)
}

/** The `id:` of every event of an SSE body that has one, in order. */
export function eventIds (body: string): string[] {
  return sseEvents(body).flatMap(event => event.id === undefined ? [] : [event.id])
}

/** What one run of a stream tool saw. */
export interface ToolRun {
  tag: string
  startedAt: number
  abortedAt: number | undefined
  /** `RequestCancelledError.source` of the abort (`'foreign'` when the reason was something else). */
  source: string | undefined
  endedAt: number | undefined
}

/**
 * Tools whose answers stream for a while, each run recorded by its `tag`:
 * - `steps {count, everyMs, tag}`: progress 1..count, `everyMs` apart, then `steps <count>`;
 * - `gate {tag}`: progress 1, then waits until the test calls `release(tag)`, then `released <tag>`;
 * - `poll {ms, tag, progress?}`: `ctx.closeStream()` at once, waits `ms` (sending progress 1 half-way
 *   when `progress`), then `polled <ms>`.
 * All of them stop when their signal aborts.
 */
export class StreamTools {
  readonly runs: ToolRun[] = []
  readonly #gates = new Map<string, () => void>()
  readonly #released = new Set<string>()

  register (app: FastifyInstance): void {
    app.mcp.tool<{ count: number, everyMs: number, tag: string }>({
      name: 'steps',
      description: 'Reports progress 1..count, everyMs apart',
      inputSchema: {
        type: 'object',
        properties: { count: { type: 'integer', minimum: 1 }, everyMs: { type: 'integer', minimum: 0 }, tag: { type: 'string' } },
        required: ['count', 'everyMs', 'tag']
      },
      handler: async ({ count, everyMs, tag }, ctx) => {
        const run = this.#start(tag, ctx.signal)
        try {
          for (let i = 1; i <= count; i++) {
            await sleep(everyMs, undefined, { signal: ctx.signal })
            await ctx.progress(i, count)
          }
        } finally {
          run.endedAt = Date.now()
        }
        return { content: [{ type: 'text', text: `steps ${count}` }] }
      }
    })
    app.mcp.tool<{ tag: string }>({
      name: 'gate',
      description: 'Reports progress 1, then waits until the test releases it',
      inputSchema: { type: 'object', properties: { tag: { type: 'string' } }, required: ['tag'] },
      handler: async ({ tag }, ctx) => {
        const run = this.#start(tag, ctx.signal)
        try {
          await ctx.progress(1)
          await new Promise<void>((resolve, reject) => {
            if (this.#released.has(tag)) resolve()
            this.#gates.set(tag, resolve)
            ctx.signal.addEventListener('abort', () => { reject(ctx.signal.reason) }, { once: true })
          })
        } finally {
          run.endedAt = Date.now()
        }
        return { content: [{ type: 'text', text: `released ${tag}` }] }
      }
    })
    app.mcp.tool<{ ms: number, tag: string, progress?: boolean }>({
      name: 'poll',
      description: 'Closes its stream at once, then answers after ms',
      inputSchema: {
        type: 'object',
        properties: { ms: { type: 'integer', minimum: 0 }, tag: { type: 'string' }, progress: { type: 'boolean' } },
        required: ['ms', 'tag']
      },
      handler: async ({ ms, tag, progress }, ctx) => {
        const run = this.#start(tag, ctx.signal)
        try {
          ctx.closeStream()
          await sleep(ms / 2, undefined, { signal: ctx.signal })
          if (progress === true) await ctx.progress(1, 1)
          await sleep(ms / 2, undefined, { signal: ctx.signal })
        } finally {
          run.endedAt = Date.now()
        }
        return { content: [{ type: 'text', text: `polled ${ms}` }] }
      }
    })
  }

  /** Lets the `gate` run tagged `tag` answer (now, or as soon as it starts). */
  release (tag: string): void {
    this.#released.add(tag)
    this.#gates.get(tag)?.()
  }

  /** The run tagged `tag`. */
  run (tag: string): ToolRun | undefined {
    return this.runs.find(run => run.tag === tag)
  }

  #start (tag: string, signal: AbortSignal): ToolRun {
    const run: ToolRun = { tag, startedAt: Date.now(), abortedAt: undefined, source: undefined, endedAt: undefined }
    this.runs.push(run)
    signal.addEventListener('abort', () => {
      run.abortedAt = Date.now()
      const reason: unknown = signal.reason
      run.source = reason instanceof RequestCancelledError ? reason.source : 'foreign'
    }, { once: true })
    return run
  }
}

/** The headers of a resume: `Accept: text/event-stream`, the 2025-11-25 version, `Last-Event-ID` and `extra` (a session, a principal). */
export function resumeHeaders (lastEventId: string, extra: Record<string, string> = {}): Record<string, string> {
  return { accept: 'text/event-stream', ...LEGACY, 'last-event-id': lastEventId, ...extra }
}

/** A resume over a connection of its own (closed at the end of the test), read as it arrives. */
export function resume (t: Teardown, url: URL, headers: Record<string, string>): EventStream {
  const stream = EventStream.get(url, headers)
  t.teardown(() => { stream.close() })
  return stream
}

/** A resumable stream's connection that keeps what it is written and closes when the test says. */
export class RecordingConnection implements StreamConnection {
  readonly frames: string[] = []
  ended = false
  readonly #onClose: Array<(finished: boolean) => void> = []

  write (frame: string): void { this.frames.push(frame) }
  end (): void { this.ended = true }
  onClose (handler: (finished: boolean) => void): void { this.#onClose.push(handler) }
  /** The connection is over: `finished` when all that was written went out. */
  close (finished = false): void { for (const handler of this.#onClose) handler(finished) }

  /** The data of each event written, the priming event's (empty) aside. */
  get data (): string[] {
    return this.frames.flatMap(frame => /^data: (.+)$/m.exec(frame)?.[1] ?? [])
  }
}

/** An HTTP request the SDK client made, where it went, and what came back. */
export interface ClientRequest {
  method: string
  host: string
  lastEventId: string | null
  status: number | undefined
  contentType: string | null | undefined
}

/**
 * The SDK 1.x client (protocol 2025-11-25) on `url`, every HTTP request it makes recorded; each GET goes
 * to `getTo(n)` when given (n: the resumes, GETs with `Last-Event-ID`, made before it). Closed at the
 * end of the test.
 */
export async function recordingClient (t: Teardown, url: URL, name: string, getTo?: (resumesBefore: number) => URL): Promise<{ client: LegacyClient, requests: ClientRequest[] }> {
  const requests: ClientRequest[] = []
  const transport = new LegacyTransport(url, {
    // The server's `retry` overrides the delays; the retries let a reconnect that fails on a busy machine try again.
    reconnectionOptions: { initialReconnectionDelay: 100, maxReconnectionDelay: 1000, reconnectionDelayGrowFactor: 1.5, maxRetries: 5 },
    fetch: async (input, init) => {
      const method = init?.method ?? 'GET'
      const headers = new Headers(init?.headers)
      const target = method === 'GET' && getTo !== undefined ? getTo(resumesOf(requests).length) : new URL(input instanceof Request ? input.url : String(input))
      const record: ClientRequest = { method, host: target.host, lastEventId: headers.get('last-event-id'), status: undefined, contentType: undefined }
      requests.push(record)
      const response = await fetch(target, init)
      record.status = response.status
      record.contentType = response.headers.get('content-type')
      return response
    }
  })
  const client = new LegacyClient({ name, version: '1.0.0' })
  t.teardown(() => client.close())
  await client.connect(transport)
  return { client, requests }
}

/** The resumes the client made: GETs with `Last-Event-ID`. */
export function resumesOf (requests: readonly ClientRequest[]): ClientRequest[] {
  return requests.filter(request => request.method === 'GET' && request.lastEventId !== null)
}

/** What the client saw of a call cut midway: its outcome, every progress value, and how many came before the cut. */
export interface CutCall {
  outcome: Outcome<Awaited<ReturnType<LegacyClient['callTool']>>>
  progress: number[]
  seenAtCut: number
}

/**
 * A `steps` call (`count` progress events, 100 ms apart) through `client`, `cut()` once `cutAfter` of
 * them arrived (the client then has to resume by itself); resolves once the call has ended.
 */
export async function callCutMidway (client: LegacyClient, tag: string, cut: () => void, { count = 10, cutAfter = 3, patienceMs = 5000 } = {}): Promise<CutCall> {
  const progress: number[] = []
  const call = attempt(client.callTool({ name: 'steps', arguments: { count, everyMs: 100, tag } }, undefined, {
    onprogress: update => { progress.push(update.progress) }, timeout: 20_000
  }))
  await waitFor(() => progress.length >= cutAfter, patienceMs)
  cut()
  const seenAtCut = progress.length
  return { outcome: await call, progress, seenAtCut }
}

/** from, from + 1, …, to. */
export function range (from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i)
}
