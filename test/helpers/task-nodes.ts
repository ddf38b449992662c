/**
 * Nodes for the multi-node task tests (test/tasks-multi-node.test.ts): in-process plugin nodes with
 * recording task tools, the demo server (example/server.ts) as a child process that a test can
 * SIGKILL, and small readers of Redis keys, Pub/Sub channels and a node's `/metrics`.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import type { FastifyServerOptions } from 'fastify'
import type { Redis } from 'ioredis'
import { elicitation, RequestCancelledError, type McpCancellationOptions, type ToolContext } from '../../lib/index.js'
import { listenPlugin, type Listening, type Teardown } from './cancellation-server.js'
import { parseExposition, scrape } from './prometheus.js'
import { captureLogs } from './streams.js'
import { fetchSender, Gate, TaskClient } from './tasks.js'

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

export interface TaskNode extends Listening {
  name: string
  client: TaskClient
  /** The lines this node logged at `warn` and above. */
  logs: () => Array<Record<string, unknown>>
}

/** The plugin with `options` and the task tools on 127.0.0.1:0, logging `warn` and above into memory; closed at the end of the test. */
export async function startTaskNode (t: Teardown, name: string, tools: TaskTools, options: McpCancellationOptions,
  fastifyOptions: FastifyServerOptions = {}): Promise<TaskNode> {
  const logs = captureLogs('warn')
  const listening = await listenPlugin(t, { serverInfo: { name, version: '1.0.0' }, ...options }, { ...logs.options, ...fastifyOptions },
    app => { tools.register(app, name) })
  return { ...listening, name, client: new TaskClient(fetchSender(listening.url)), logs: logs.lines }
}

/** Pino's numeric level of `error`. */
const ERROR_LEVEL = 50

/** The node's log lines at error level or above. */
export function errorLinesOf (node: { logs: () => Array<Record<string, unknown>> }): Array<Record<string, unknown>> {
  return node.logs().filter(line => typeof line.level === 'number' && line.level >= ERROR_LEVEL)
}

/** Polls an async predicate every `everyMs` until it holds (true) or `timeoutMs` passes (false). */
export async function eventually (predicate: () => Promise<boolean> | boolean, timeoutMs: number, everyMs = 20): Promise<boolean> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await predicate()) return true
    if (Date.now() >= deadline) return false
    await sleep(everyMs)
  }
}

/** Every key matching `pattern` (SCAN, not KEYS), sorted. */
export async function scanKeys (redis: Redis, pattern: string): Promise<string[]> {
  const keys = new Set<string>()
  let cursor = '0'
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000)
    for (const key of batch) keys.add(key)
    cursor = next
  } while (cursor !== '0')
  return [...keys].sort()
}

/** The Pub/Sub channels matching `pattern` that have a subscriber. */
export async function channels (redis: Redis, pattern: string): Promise<string[]> {
  return (await redis.pubsub('CHANNELS', pattern) as string[]).sort()
}

/** How many subscribers `channel` has. */
export async function subscribers (redis: Redis, channel: string): Promise<number> {
  const [, count] = await redis.pubsub('NUMSUB', channel) as [string, number | string]
  return Number(count)
}

/** The value of `name{labels}` in the node's `/metrics` (labels must match exactly); 0 when the series is absent. */
export async function metricValue (url: URL, name: string, labels: Record<string, string> = {}): Promise<number> {
  return parseExposition((await scrape(new URL('/metrics', url))).text).value(name, labels) ?? 0
}

/** The sum of the samples `name` whose labels include `labels` (0 when there are none). */
export async function metricSum (url: URL, name: string, labels: Record<string, string>): Promise<number> {
  const samples = parseExposition((await scrape(new URL('/metrics', url))).text).samples(name)
  return samples.filter(sample => Object.entries(labels).every(([key, value]) => sample.labels[key] === value))
    .reduce((sum, sample) => sum + sample.value, 0)
}

const REPO = fileURLToPath(new URL('../../', import.meta.url))
const DEMO_START_TIMEOUT_MS = 20_000
/**
 * Preloaded into the demo child: it kills itself once its stdin (a pipe from this process) ends, so
 * it cannot outlive this process however that ends (even SIGKILL, which skips every teardown).
 */
const STDIN_WATCHDOG = 'data:text/javascript,process.stdin.on("end",()=>{process.kill(process.pid,"SIGKILL")});process.stdin.on("error",()=>{});process.stdin.resume()'

/** Pids of the demo children this process runs, killed synchronously if it exits without teardown. */
const liveChildren = new Set<number>()
process.once('exit', () => {
  for (const pid of liveChildren) {
    try { process.kill(pid, 'SIGKILL') } catch {}
  }
})

export interface DemoChild {
  url: URL
  pid: number
  /** SIGKILLs the process (a crash: nothing runs on its way out) and resolves once it has exited. */
  kill: () => Promise<void>
  readonly exited: boolean
  /** The tail of its stdout and stderr. */
  output: () => string
}

/**
 * The demo server (example/server.ts) in a child process of its own: `node --import tsx example/server.ts`
 * run by this very node binary (not node_modules/.bin/tsx, whose wrapper would be a second process a
 * SIGKILL misses), on 127.0.0.1 and a port of the kernel's choosing, with `env` (MCP_REDIS_URL,
 * MCP_SECRET, MCP_TASK_LEASE_MS, …). Resolves once it listens; killed in `t`'s teardown.
 */
export async function startDemoChild (t: Teardown, env: Record<string, string>): Promise<DemoChild> {
  const childEnv: NodeJS.ProcessEnv = {}
  // Not tap's loaders and coverage hooks: the child is the demo as an operator runs it.
  for (const [key, value] of Object.entries(process.env)) {
    if (key !== 'NODE_OPTIONS' && !key.startsWith('TAP') && !key.startsWith('_TAPJS')) childEnv[key] = value
  }
  Object.assign(childEnv, { LOG_LEVEL: 'info', HOST: '127.0.0.1', PORT: '0' }, env)
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', '--import', STDIN_WATCHDOG, 'example/server.ts'], {
    cwd: REPO, env: childEnv, stdio: ['pipe', 'pipe', 'pipe']
  })
  const pid = child.pid
  let output = ''
  const keep = (chunk: Buffer): void => { output = (output + chunk.toString('utf8')).slice(-20_000) }
  child.stdout!.on('data', keep)
  child.stderr!.on('data', keep)
  child.stdin!.on('error', () => {})
  let exited = false
  const exit = once(child, 'exit').then(() => {
    exited = true
    if (pid !== undefined) liveChildren.delete(pid)
    child.stdin!.destroy()
  })
  const kill = async (): Promise<void> => {
    if (exited) return
    child.kill('SIGKILL')
    await exit
  }
  t.teardown(kill)
  if (pid === undefined) {
    await Promise.race([exit, once(child, 'error').catch(() => {})])
    throw new Error(`the demo child did not start:\n${output}`)
  }
  liveChildren.add(pid)

  const deadline = Date.now() + DEMO_START_TIMEOUT_MS
  let port: number | undefined
  while (port === undefined) {
    const listening = /Server listening at http:\/\/127\.0\.0\.1:(\d+)/.exec(output)
    if (listening !== null) port = Number(listening[1])
    else if (exited || Date.now() >= deadline) {
      await kill()
      throw new Error(`the demo child ${exited ? 'exited' : 'did not listen'} before listening:\n${output.slice(-4000)}`)
    } else await sleep(20)
  }
  return { url: new URL(`http://127.0.0.1:${port}/mcp`), pid, kill, get exited () { return exited }, output: () => output }
}
