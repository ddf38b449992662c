import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import type { ProbeCommand, ProbeMessage } from '../servers/probe.js'

const STARTUP_TIMEOUT_MS = 30_000

/** `performance.timeOrigin + performance.now()`: the clock compared across processes. */
export const epochNow = (): number => performance.timeOrigin + performance.now()

/**
 * `benchmarks/servers/probe.ts` in a process of its own, with an IPC channel for its reports (as
 * cross-node.ts does with its cluster nodes): the benchmark process is only the client.
 */
export class ProbeProcess {
  readonly url: URL
  readonly pid: number
  readonly #child: ChildProcess
  readonly #waiters = new Map<string, (message: ProbeMessage) => void>()
  readonly #errors: string[] = []
  /** Add to the server's epoch instants to express them on this process's clock. */
  offsetMs = 0
  /** Round trip of the ping the offset came from: the offset is exact to within half of it. */
  offsetRttMs = Infinity

  private constructor (child: ChildProcess, port: number) {
    this.#child = child
    this.pid = child.pid!
    this.url = new URL(`http://127.0.0.1:${port}/mcp`)
    child.on('message', (message: ProbeMessage) => {
      if (message.type === 'error') {
        this.#errors.push(message.message)
        for (const [key, waiter] of this.#waiters) {
          this.#waiters.delete(key)
          waiter(message)
        }
        return
      }
      const key = ProbeProcess.#keyOf(message)
      const waiter = this.#waiters.get(key)
      if (waiter !== undefined) {
        this.#waiters.delete(key)
        waiter(message)
      }
    })
  }

  static #keyOf (message: ProbeMessage): string {
    switch (message.type) {
      case 'clock': return `clock:${message.seq}`
      case 'started': case 'aborted': return `${message.type}:${message.tag}`
      case 'spinning': case 'killed': return `${message.type}:${message.id}`
      case 'error': return 'error'
    }
  }

  static async start (env: Record<string, string>, nodeArgs: readonly string[]): Promise<ProbeProcess> {
    const script = fileURLToPath(new URL('../servers/probe.ts', import.meta.url))
    const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', script], {
      cwd: fileURLToPath(new URL('../..', import.meta.url)),
      stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
      env: { ...process.env, NODE_ENV: 'production', ...env }
    })
    const lines = createInterface({ input: child.stdout! })
    let timer: NodeJS.Timeout | undefined
    const exited = once(child, 'exit').then(([code, signal]) => { throw new Error(`probe server exited (${String(code ?? signal)}) before listening`) })
    try {
      const port = await Promise.race([
        (async () => {
          for await (const line of lines) {
            const port = Number(line.trim())
            if (/^\d+$/.test(line.trim()) && port > 0) return port
            process.stderr.write(`${line}\n`) // e.g. --trace-gc output from BENCH_NODE_ARGS
          }
          throw new Error('probe server closed stdout before printing its port')
        })(),
        exited,
        new Promise<never>((_resolve, reject) => { timer = setTimeout(() => { reject(new Error(`probe server did not listen within ${STARTUP_TIMEOUT_MS} ms`)) }, STARTUP_TIMEOUT_MS) })
      ])
      return new ProbeProcess(child, port)
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

  /** Resolves with the server's next report of `type` about `key` (a tag or a request id); register before causing it. */
  next<T extends ProbeMessage['type']> (type: T, key: string): Promise<Extract<ProbeMessage, { type: T }>> {
    return new Promise((resolve, reject) => {
      this.#waiters.set(`${type}:${key}`, message => {
        if (message.type === 'error') reject(new Error(`probe server: ${message.message}`))
        else resolve(message as Extract<ProbeMessage, { type: T }>)
      })
    })
  }

  /** Forgets a waiter that will not be answered (after a timeout). */
  forget (type: ProbeMessage['type'], key: string): void {
    this.#waiters.delete(`${type}:${key}`)
  }

  send (command: ProbeCommand): void {
    this.#child.send(command)
  }

  /** Estimates the clock offset from `pings` IPC round trips, keeping the one with the smallest round trip (as cross-node.ts). */
  async syncClock (pings = 50): Promise<void> {
    for (let seq = 0; seq < pings; seq++) {
      const reply = this.next('clock', String(seq))
      const sent = epochNow()
      this.send({ type: 'clock', seq })
      const message = await reply
      const received = epochNow()
      const rtt = received - sent
      if (rtt < this.offsetRttMs) {
        this.offsetRttMs = rtt
        this.offsetMs = (sent + received) / 2 - message.at
      }
    }
  }

  async stop (): Promise<void> {
    if (this.#child.exitCode !== null || this.#child.signalCode !== null) return
    const exited = once(this.#child, 'exit')
    this.#child.kill('SIGTERM')
    const timer = setTimeout(() => this.#child.kill('SIGKILL'), 10_000)
    await exited
    clearTimeout(timer)
  }
}
