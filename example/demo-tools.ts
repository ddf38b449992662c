/**
 * The tools `npm start` shows (DESIGN §8), one of each kind a server needs: `echo` (a plain result),
 * `sleep` (progress, cancellation), `stubborn` (a handler that ignores cancellation: the kill timeout),
 * `spin` (a worker thread), `confirm_action` (asks the user, in both eras), `render` (runs as a task
 * of the 2026-07-28 tasks extension for a client that declared it) and `touch_resource` (tells the
 * clients subscribed to a resource that it changed, on every node), with the resource `demo://touches`.
 */
import { extname } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import type { FastifyInstance } from 'fastify'
import { ToolError, type CallToolResult, type ToolContext, type ToolDefinition } from '../lib/index.js'

/** A result of one text item, the shape most tools answer with. */
const textResult = (text: string): CallToolResult => ({ content: [{ type: 'text', text }] })

/** How long `render` takes per frame. */
const FRAME_MS = 250

/** The demo `sleep` tool: waits in steps, reporting progress; stops at once when cancelled. */
export const sleepTool: ToolDefinition<{ ms: number, stepMs?: number }> = {
  name: 'sleep',
  description: 'Waits ms milliseconds in steps, reporting progress each step; stops at once when cancelled',
  inputSchema: {
    type: 'object',
    properties: {
      ms: { type: 'integer', minimum: 0, maximum: 600_000 },
      stepMs: { type: 'integer', minimum: 1 }
    },
    required: ['ms']
  },
  handler: async ({ ms, stepMs = 50 }, ctx) => await sleepInSteps(ms, stepMs, ctx)
}

/** Sleeps `ms` in steps of `stepMs`, reporting progress before each; stops at once when cancelled. */
export async function sleepInSteps (ms: number, stepMs: number, ctx: ToolContext): Promise<CallToolResult> {
  for (let elapsed = 0; elapsed < ms; elapsed += stepMs) {
    ctx.throwIfCancelled()
    await ctx.progress(elapsed, ms)
    await sleep(Math.min(stepMs, ms - elapsed), undefined, { signal: ctx.signal })
  }
  return textResult(`slept ${ms}`)
}

/** `scoped`: with authentication on, `scoped_echo` too (a tool whose caller needs the `demo:write` scope). */
export function registerDemoTools (app: FastifyInstance, { scoped }: { scoped: boolean }): void {
  const { mcp } = app

  mcp.tool<{ text: string }>({
    name: 'echo',
    description: 'Returns its text',
    inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
    handler: ({ text }) => textResult(text)
  })

  if (scoped) {
    mcp.tool<{ text: string }>({
      name: 'scoped_echo',
      description: 'Returns its text; the caller\'s token needs the demo:write scope',
      scopes: ['demo:write'],
      inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
      handler: ({ text }) => textResult(text)
    })
  }

  mcp.tool(sleepTool)

  mcp.tool<{ ms: number }>({
    name: 'stubborn',
    description: 'Waits ms milliseconds ignoring every cancellation signal (exercises the kill timeout)',
    inputSchema: { type: 'object', properties: { ms: { type: 'integer', minimum: 0, maximum: 600_000 } }, required: ['ms'] },
    async handler ({ ms }) {
      await sleep(ms)
      return textResult(`ignored cancellation for ${ms}`)
    }
  })

  mcp.tool({
    name: 'spin',
    description: 'Busy CPU loop for ms milliseconds in a worker thread; never checks cancellation',
    inputSchema: { type: 'object', properties: { ms: { type: 'integer', minimum: 0, maximum: 600_000 } }, required: ['ms'] },
    // The worker's file has this module's extension: .ts under tsx (npm start), .js once compiled.
    worker: { filename: new URL(`./workers/spin${extname(fileURLToPath(import.meta.url))}`, import.meta.url), name: 'spin' }
  })

  // Asking the user is one call in both eras: a request on the response's SSE stream in the legacy era,
  // an `input_required` round that the client retries with the answer in 2026-07-28 (where the handler
  // runs again from the top, so nothing before the ask should have effects).
  mcp.tool<{ action: string }>({
    name: 'confirm_action',
    description: 'Asks the user to confirm an action (elicitation), then says what they answered',
    inputSchema: { type: 'object', properties: { action: { type: 'string', description: 'What to do, e.g. "water the plants"' } }, required: ['action'] },
    requiredClientCapabilities: { elicitation: {} },
    async handler ({ action }, ctx) {
      const answer = await ctx.elicit({
        message: `Do you want to ${action}?`,
        requestedSchema: { type: 'object', properties: { confirm: { type: 'boolean', title: `Yes, ${action}` } }, required: ['confirm'] }
      })
      if (answer.action === 'decline') return textResult(`Not done: you declined to answer about "${action}"`)
      if (answer.action === 'cancel') return textResult(`Not done: you dismissed the question about "${action}"`)
      return textResult(answer.content?.confirm === true ? `Done: ${action}` : `Not done: you answered no to "${action}"`)
    }
  })

  // For a client that declared the tasks extension, `ctx.startTask()` answers the call with a task id at
  // once and the handler goes on: its progress is the task's statusMessage (tasks/get), tasks/cancel
  // aborts ctx.signal. For any other client it does nothing and the call is an ordinary one.
  mcp.tool<{ frames?: number }>({
    name: 'render',
    description: `Renders frames (default 12, ${FRAME_MS} ms each), reporting progress; a task for clients of the tasks extension; cancellable`,
    inputSchema: { type: 'object', properties: { frames: { type: 'integer', minimum: 1, maximum: 100 } } },
    task: 'optional',
    async handler ({ frames = 12 }, ctx) {
      await ctx.startTask()
      for (let frame = 1; frame <= frames; frame++) {
        await sleep(FRAME_MS, undefined, { signal: ctx.signal })
        await ctx.progress(frame, frames, 'Rendering')
      }
      return textResult(`Rendered ${frames} frame${frames === 1 ? '' : 's'}`)
    }
  })

  // A resource that changes, and the tool that changes it: its subscribers (a modern listen's
  // resourceSubscriptions, a legacy session's resources/subscribe) get notifications/resources/updated.
  let touches = 0
  mcp.resource({
    uri: TOUCHES_URI,
    name: 'touches',
    description: 'How many times touch_resource has run on this node',
    mimeType: 'text/plain',
    handler: uri => ({ contents: [{ uri, mimeType: 'text/plain', text: String(touches) }] })
  })
  mcp.tool<{ uri: string }>({
    name: 'touch_resource',
    description: `Announces that the resource at uri (e.g. ${TOUCHES_URI}) has changed, to its subscribers on every node`,
    inputSchema: { type: 'object', properties: { uri: { type: 'string', minLength: 1 } }, required: ['uri'] },
    handler: ({ uri }) => {
      try {
        mcp.notify.resourceUpdated(uri)
      } catch (error) {
        throw new ToolError((error as Error).message)
      }
      touches++
      return textResult(`touched ${uri}`)
    }
  })
}

/** The demo's resource that `touch_resource` changes. */
export const TOUCHES_URI = 'demo://touches'
