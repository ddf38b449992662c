/**
 * Nodes for the task tests across nodes: in-process plugin nodes (see `startNode`) with recording task
 * tools and a task client of their own.
 */
import type { FastifyServerOptions } from 'fastify'
import { elicitation, RequestCancelledError, type McpCancellationOptions, type ToolContext } from '../../lib/index.js'
import { startNode, type Node } from './cluster.js'
import type { Listening } from './listen.js'
import { fetchSender, Gate, TaskClient } from './tasks.js'
import type { Teardown } from './teardown.js'

const OK_SCHEMA = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] }
const TAG_SCHEMA = { type: 'object', properties: { tag: { type: 'string' }, fail: { type: 'boolean' } }, required: ['tag'] }

/** What one call of a recording task tool did, on which node. */
export interface TaskRun {
  tag: string
  node: string
  /** The handler got past `ctx.startTask()`. */
  afterStart: boolean
  /** `ctx.signal`'s abort, when it fired. */
  aborted: { source: string, reason: string | null } | undefined
  /** The answer `tasks/update` gave the `ask` tool. */
  answer: unknown
  endedAt: number | undefined
}

/**
 * The recording task tools, registered on every in-process node (tags are unique across nodes):
 * - `hold {tag, fail?}` (optional): starts a task, waits for its gate (`open(tag)`) or its cancellation;
 *   answers `held <tag>` with `structuredContent {tag, node}`, or throws (a failed task) when `fail`;
 * - `ask {tag}` (optional): starts a task, then asks `confirm` (elicitation); answers with the answer.
 */
export class TaskTools {
  readonly runs = new Map<string, TaskRun>()
  readonly #gates = new Map<string, Gate>()

  /** The run tagged `tag`, once its handler started. */
  run (tag: string): TaskRun | undefined {
    return this.runs.get(tag)
  }

  /** Lets `hold {tag}` finish. */
  open (tag: string): void {
    this.#gate(tag).open()
  }

  #gate (tag: string): Gate {
    let gate = this.#gates.get(tag)
    if (gate === undefined) this.#gates.set(tag, gate = new Gate())
    return gate
  }

  #start (tag: string, node: string, ctx: ToolContext): { run: TaskRun, cancelled: Promise<never> } {
    const run: TaskRun = { tag, node, afterStart: false, aborted: undefined, answer: undefined, endedAt: undefined }
    this.runs.set(tag, run)
    const cancelled = new Promise<never>((_resolve, reject) => {
      const aborted = (): void => {
        const reason: unknown = ctx.signal.reason
        run.aborted = reason instanceof RequestCancelledError ? { source: reason.source, reason: reason.reason } : { source: `foreign: ${String(reason)}`, reason: null }
        reject(reason)
      }
      if (ctx.signal.aborted) aborted()
      else ctx.signal.addEventListener('abort', aborted, { once: true })
    })
    cancelled.catch(() => {})
    return { run, cancelled }
  }

  register (app: Listening['app'], node: string): void {
    app.mcp.tool<{ tag: string, fail?: boolean }>({
      name: 'hold',
      description: 'A task that waits for the test to open its gate, or for its cancellation',
      task: 'optional',
      inputSchema: TAG_SCHEMA,
      handler: async ({ tag, fail }, ctx) => {
        const { run, cancelled } = this.#start(tag, node, ctx)
        try {
          await ctx.startTask()
          run.afterStart = true
          await Promise.race([this.#gate(tag).promise, cancelled])
        } finally {
          run.endedAt = Date.now()
        }
        if (fail === true) throw new Error(`hold ${tag} failed on purpose`)
        return { content: [{ type: 'text', text: `held ${tag}` }], structuredContent: { tag, node } }
      }
    })
    app.mcp.tool<{ tag: string }>({
      name: 'ask',
      description: 'A task that asks for a confirmation after it started',
      task: 'optional',
      inputSchema: TAG_SCHEMA,
      handler: async ({ tag }, ctx) => {
        const { run, cancelled } = this.#start(tag, node, ctx)
        try {
          await ctx.startTask()
          run.afterStart = true
          const { confirm } = await Promise.race([
            ctx.input({ confirm: elicitation({ message: `Go ahead with ${tag}?`, requestedSchema: OK_SCHEMA }) }),
            cancelled
          ])
          run.answer = confirm
          return {
            content: [{ type: 'text', text: `${tag}: ${confirm.action} ${String(confirm.content?.ok)}` }],
            structuredContent: { tag, node, action: confirm.action }
          }
        } finally {
          run.endedAt = Date.now()
        }
      }
    })
  }
}

export interface TaskNode extends Node {
  client: TaskClient
}

/** A node (`startNode`) with the task tools registered as `name`, and a task client of its own. */
export async function startTaskNode (t: Teardown, name: string, tools: TaskTools, options: McpCancellationOptions,
  fastifyOptions: FastifyServerOptions = {}): Promise<TaskNode> {
  const node = await startNode(t, name, options, fastifyOptions, app => { tools.register(app, name) })
  return { ...node, client: new TaskClient(fetchSender(node.url)) }
}
