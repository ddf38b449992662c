import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'

const STARTUP_TIMEOUT_MS = 30_000

/** `performance.timeOrigin + performance.now()`: the clock compared across processes. */
export const epochNow = (): number => performance.timeOrigin + performance.now()

/**
 * Starts a benchmark server script in a process of its own with an IPC channel, and resolves with it
 * and the port it printed as its first number line once listening (other lines, e.g. --trace-gc output
 * from BENCH_NODE_ARGS, go to stderr).
 */
export async function spawnServer (script: URL, env: Record<string, string>, nodeArgs: readonly string[], label: string): Promise<{ child: ChildProcess, port: number }> {
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', fileURLToPath(script)], {
    cwd: fileURLToPath(new URL('../..', import.meta.url)),
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    env: { ...process.env, NODE_ENV: 'production', ...env }
  })
  const lines = createInterface({ input: child.stdout! })
  let timer: NodeJS.Timeout | undefined
  const exited = once(child, 'exit').then(([code, signal]) => { throw new Error(`${label} exited (${String(code ?? signal)}) before listening`) })
  try {
    const port = await Promise.race([
      (async () => {
        for await (const line of lines) {
          const port = Number(line.trim())
          if (/^\d+$/.test(line.trim()) && port > 0) return port
          process.stderr.write(`${line}\n`)
        }
        throw new Error(`${label} closed stdout before printing its port`)
      })(),
      exited,
      new Promise<never>((_resolve, reject) => { timer = setTimeout(() => { reject(new Error(`${label} did not listen within ${STARTUP_TIMEOUT_MS} ms`)) }, STARTUP_TIMEOUT_MS) })
    ])
    return { child, port }
  } catch (error) {
    child.kill('SIGKILL')
    throw error
  } finally {
    clearTimeout(timer)
    exited.catch(() => {})
    lines.close()
    child.stdout!.pipe(process.stderr)
  }
}

export async function stopChild (child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = once(child, 'exit')
  child.kill('SIGTERM')
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000)
  await exited
  clearTimeout(timer)
}

/**
 * The offset to add to another process's epoch instants to put them on this process's clock, from
 * `pings` IPC round trips (`ping(seq)` resolves with the other side's `epochNow()`); the round trip with
 * the smallest duration wins, and half of it bounds the error.
 */
export async function estimateClockOffset (ping: (seq: number) => Promise<number>, pings = 50): Promise<{ offsetMs: number, rttMs: number }> {
  let best = { offsetMs: 0, rttMs: Infinity }
  for (let seq = 0; seq < pings; seq++) {
    const sent = epochNow()
    const at = await ping(seq)
    const received = epochNow()
    if (received - sent < best.rttMs) best = { offsetMs: (sent + received) / 2 - at, rttMs: received - sent }
  }
  return best
}

/**
 * A benchmark server in a process of its own with an IPC channel: where it listens, and its clock as
 * this process sees it. Each kind says how its server answers a clock ping (`clockAt`).
 */
export abstract class ServerProcess {
  readonly url: URL
  readonly pid: number
  protected readonly child: ChildProcess
  /** Add to the server's epoch instants to express them on this process's clock. */
  offsetMs = 0
  /** Round trip of the ping the offset came from: the offset is exact to within half of it. */
  offsetRttMs = Infinity

  protected constructor (child: ChildProcess, port: number) {
    this.child = child
    this.pid = child.pid!
    this.url = new URL(`http://127.0.0.1:${port}/mcp`)
  }

  /** The server's `epochNow()` in answer to clock ping `seq`. */
  protected abstract clockAt (seq: number): Promise<number>

  /** Estimates the clock offset over IPC (see `estimateClockOffset`). */
  async syncClock (pings = 50): Promise<void> {
    const { offsetMs, rttMs } = await estimateClockOffset(async seq => await this.clockAt(seq), pings)
    this.offsetMs = offsetMs
    this.offsetRttMs = rttMs
  }

  async stop (): Promise<void> {
    await stopChild(this.child)
  }
}
