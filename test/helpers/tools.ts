/**
 * Tools the tests register on an app: `echo` (as the demo's), the demo's `sleep`, `ignore-cancel` (keeps
 * running whatever happens), `count` (did anything reach a handler?) and the `probe`, which records
 * when and why its `ctx.signal` aborted.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance } from 'fastify'
import { sleepTool } from '../../example/app.js'
import { RequestCancelledError, type RequestId } from '../../lib/index.js'

/** Registers `echo {text}`: returns its text, as the demo's `echo`. */
export function registerEcho (app: FastifyInstance): void {
  app.mcp.tool<{ text: string }>({
    name: 'echo',
    description: 'Returns its text',
    inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
    handler: ({ text }) => ({ content: [{ type: 'text', text }] })
  })
}

/** Registers the demo's `sleep` tool (example/app.ts), for apps built from the bare plugin. */
export function registerSleep (app: FastifyInstance): void {
  app.mcp.tool(sleepTool)
}

/** Registers `ignore-cancel {ms}`: waits `ms` whatever happens (it keeps its in-flight row until it ends). */
export function registerIgnoreCancel (app: FastifyInstance): void {
  app.mcp.tool<{ ms: number }>({
    name: 'ignore-cancel',
    description: 'Waits ms milliseconds, ignoring cancellation',
    inputSchema: { type: 'object', properties: { ms: { type: 'integer', minimum: 0 } }, required: ['ms'] },
    handler: async ({ ms }) => {
      await sleep(ms)
      return { content: [{ type: 'text', text: `ignored ${ms}` }] }
    }
  })
}

/** Counts the calls that reached a handler. */
export interface Counter {
  calls: number
}

/** Registers `count` (or `name`: accepts any arguments, counts its calls) and returns the counter. */
export function registerCounter (app: FastifyInstance, name = 'count'): Counter {
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

/** What the probe tool saw of one call. */
export interface ProbeCall {
  requestId: RequestId
  args: { ms: number, tag?: string }
  startedAt: number
  abortedAt: number | undefined
  /** `RequestCancelledError.reason` of the abort. */
  reason: string | null | undefined
  /** `RequestCancelledError.source` of the abort. */
  source: string | undefined
  /** True when the abort reason was not a `RequestCancelledError`. */
  foreignReason: boolean
  endedAt: number | undefined
}

/** Registers `probe {ms, tag?}`: sends one progress (so a call with a progressToken streams), then waits `ms` on `ctx.signal`. */
export class Probe {
  readonly calls: ProbeCall[] = []

  register (app: FastifyInstance): void {
    app.mcp.tool<{ ms: number, tag?: string }>({
      name: 'probe',
      description: 'Records when and why its signal aborts',
      inputSchema: { type: 'object', properties: { ms: { type: 'integer', minimum: 0 }, tag: { type: 'string' } }, required: ['ms'] },
      handler: async (args, ctx) => {
        const call: ProbeCall = {
          requestId: ctx.requestId, args, startedAt: Date.now(), abortedAt: undefined, reason: undefined, source: undefined, foreignReason: false, endedAt: undefined
        }
        this.calls.push(call)
        ctx.signal.addEventListener('abort', () => {
          call.abortedAt = Date.now()
          const reason: unknown = ctx.signal.reason
          if (reason instanceof RequestCancelledError) {
            call.reason = reason.reason
            call.source = reason.source
          } else {
            call.foreignReason = true
          }
        }, { once: true })
        try {
          await ctx.progress(0, args.ms)
          await sleep(args.ms, undefined, { signal: ctx.signal })
        } finally {
          call.endedAt = Date.now()
        }
        return { content: [{ type: 'text', text: `probe ${args.ms}` }] }
      }
    })
  }

  /** The calls tagged `tag`. */
  tagged (tag: string): ProbeCall[] {
    return this.calls.filter(call => call.args.tag === tag)
  }
}
