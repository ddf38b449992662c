/**
 * The demo server (example/server.ts) in a child process, as an operator runs it: for tests that need a
 * process of its own (its environment read at startup, a SIGKILL that skips every teardown).
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import type { Teardown } from './teardown.js'

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
  let exitedWith = ''
  const exit = once(child, 'exit').then(([code, signal]) => {
    exited = true
    exitedWith = signal === null ? `code ${String(code)}` : `signal ${String(signal)}`
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
      throw new Error(`the demo child ${exited ? `exited (${exitedWith})` : 'did not listen'} before listening:\n${output.slice(-4000)}`)
    } else await sleep(20)
  }
  return { url: new URL(`http://127.0.0.1:${port}/mcp`), pid, kill, get exited () { return exited }, output: () => output }
}
