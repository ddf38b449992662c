/**
 * A real, private `redis-server` for the multi-node tests and the cross-node benchmark: started on a
 * free loopback port without persistence, stoppable and restartable on the same port (to simulate an
 * outage), and always killed at the end of the test, or at the latest when this process exits.
 *
 * The port is chosen below the kernel's ephemeral range: while the server is down, clients keep
 * reconnecting to it, and a port inside the range could be handed to one of those client sockets (a
 * TCP self-connect) or to an unrelated listener on port 0, making the restart fail with EADDRINUSE.
 *
 * The Cluster and Sentinel topologies (redis-cluster.ts, redis-sentinel.ts) run their nodes and
 * sentinels as `RedisServer`s too, with arguments (and a configuration file) of their own.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { accessSync, constants, readFileSync } from 'node:fs'
import net from 'node:net'
import { delimiter, join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import type { Teardown } from './teardown.js'

const STARTUP_TIMEOUT_MS = 5000
const STOP_TIMEOUT_MS = 3000

/**
 * The Redis programs the tests run: the environment variable naming each one's path and the Debian
 * package that has it (redis-cli comes with redis-tools, which redis-server depends on).
 */
const TOOLS = {
  'redis-server': { env: 'REDIS_SERVER', apt: 'redis-server' },
  'redis-sentinel': { env: 'REDIS_SENTINEL', apt: 'redis-sentinel' },
  'redis-cli': { env: 'REDIS_CLI', apt: 'redis-tools' }
} as const

export type RedisTool = keyof typeof TOOLS

/**
 * The binary of `tool`: its environment variable (`$REDIS_SERVER`, `$REDIS_SENTINEL`, `$REDIS_CLI`)
 * when set (and only it), else the first on `PATH`, else /usr/bin/<tool>; undefined when none is
 * executable.
 */
export function redisBinary (tool: RedisTool = 'redis-server'): string | undefined {
  const override = process.env[TOOLS[tool].env]
  const candidates = override !== undefined && override !== ''
    ? [override]
    : [...(process.env.PATH ?? '').split(delimiter).filter(dir => dir !== '').map(dir => join(dir, tool)), `/usr/bin/${tool}`]
  for (const candidate of candidates) {
    try {
      accessSync(candidate, constants.X_OK)
      return candidate
    } catch {}
  }
  return undefined
}

/**
 * Whether the Redis tests can run: `false` when they can, else a skip reason. `tools` are the
 * programs a file needs (redis-server alone by default; the Cluster and Sentinel topologies also need
 * redis-cli and redis-sentinel). Without one the tests are skipped on a developer machine, but under
 * CI (`process.env.CI` set) that is a failure with a message saying what to install: a CI run must
 * never pass by skipping them.
 */
export function redisSkipReason (t: { fail: (message: string) => unknown }, tools: readonly RedisTool[] = ['redis-server']): string | false {
  const missing = tools.filter(tool => redisBinary(tool) === undefined)
  if (missing.length === 0) return false
  const message = missing.map(tool => {
    const { env, apt } = TOOLS[tool]
    const where = process.env[env] !== undefined && process.env[env] !== '' ? `at ${env}=${process.env[env]}` : `on PATH or at /usr/bin/${tool}`
    return `${tool} not found ${where}: install it (apt-get install ${apt}) or set ${env}`
  }).join('; ')
  if (process.env.CI !== undefined && process.env.CI !== '') {
    t.fail(`${message}; CI must run the multi-node tests`)
  }
  return `${message}; skipping the multi-node tests`
}

const reservedPorts = new Set<number>()

/** The lowest port of the kernel's ephemeral range (32768 when it cannot be read). */
function ephemeralFloor (): number {
  try {
    const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number)
    if (low !== undefined && Number.isInteger(low) && low > 11_000) return low
  } catch {}
  return 32_768
}

async function canBind (port: number): Promise<boolean> {
  return await new Promise(resolve => {
    const server = net.createServer()
    server.once('error', () => { resolve(false) })
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => { server.close(() => { resolve(true) }) })
  })
}

/** A loopback port nobody listens on, below the ephemeral range, not handed out before by this process. */
export async function freePort (): Promise<number> {
  const high = ephemeralFloor() - 1
  const low = Math.max(10_000, high - 20_000)
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = low + Math.floor(Math.random() * (high - low))
    if (reservedPorts.has(port)) continue
    if (await canBind(port)) {
      reservedPorts.add(port)
      return port
    }
  }
  throw new Error('no free loopback port found')
}

/** Sends PING on a raw socket; true when the answer is +PONG. */
export async function pingRedis (port: number, timeoutMs = 500): Promise<boolean> {
  return await new Promise(resolve => {
    const socket = net.connect({ host: '127.0.0.1', port })
    let answer = ''
    const done = (ok: boolean): void => {
      clearTimeout(timer)
      socket.destroy()
      resolve(ok)
    }
    const timer = setTimeout(() => { done(false) }, timeoutMs)
    socket.on('error', () => { done(false) })
    socket.on('connect', () => { socket.write('PING\r\n') })
    socket.on('data', (chunk: Buffer) => {
      answer += chunk.toString('latin1')
      if (answer.includes('\r\n')) done(answer.startsWith('+PONG'))
    })
  })
}

/**
 * Sends one command to the server on `port` on a connection of its own, closed after the answer: for
 * polling a node's state, where a node may be down (a refused connection rejects at once, a stalled
 * one after `timeoutMs`) and no reconnecting client should linger.
 */
export async function askRedis (port: number, command: string, args: ReadonlyArray<string | number> = [], timeoutMs = 1000): Promise<unknown> {
  const client = new Redis({
    host: '127.0.0.1',
    port,
    lazyConnect: true,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    enableReadyCheck: false,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null
  })
  client.on('error', () => {}) // the rejected command says it
  try {
    await client.connect()
    return await client.call(command, ...args)
  } finally {
    client.disconnect()
  }
}

/**
 * redis-server runs under a small `sh` holding the read end of our stdin pipe: however this process
 * ends (even SIGKILL, or a timeout that skips 'exit' handlers), the pipe closes and the watcher kills
 * the server. The `sh` prints the server's pid on stdout (the server's own output goes to stderr),
 * then waits for it, so its exit means the server is gone and its port free.
 */
const WATCHDOG = [
  'exec 3<&0',
  '"$0" "$@" </dev/null 3<&- 1>&2 & pid=$!',
  'echo "$pid"',
  '( read _ <&3; kill -9 "$pid" 2>/dev/null ) </dev/null >/dev/null 2>&1 &',
  'wait "$pid"'
].join('\n')

/** Pids of the servers this process runs, killed synchronously if it exits without teardown. */
const live = new Set<number>()
process.once('exit', () => {
  for (const pid of live) {
    try { process.kill(pid, 'SIGKILL') } catch {}
  }
})

interface Running {
  /** The watchdog `sh`. */
  shell: ChildProcess
  /** redis-server's pid. */
  pid: number
  exited: Promise<unknown>
}

export interface RedisServerOptions {
  port?: number
  /** false: made but not started (a test starts it later). */
  running?: boolean
  /** The program: a redis-server (the default) or a redis-sentinel. */
  tool?: 'redis-server' | 'redis-sentinel'
  /** A configuration file, given first (a sentinel needs one it can rewrite). */
  config?: string
  /** Arguments after the defaults (`--cluster-enabled yes`, `--replicaof …`); a later one wins. */
  args?: readonly string[]
}

export class RedisServer {
  readonly port: number
  readonly binary: string
  readonly tool: 'redis-server' | 'redis-sentinel'
  readonly #config: readonly string[]
  readonly #args: readonly string[]
  #running: Running | undefined
  #output = ''

  private constructor (binary: string, port: number, options: RedisServerOptions) {
    this.binary = binary
    this.port = port
    this.tool = options.tool ?? 'redis-server'
    this.#config = options.config === undefined ? [] : [options.config]
    this.#args = options.args ?? []
  }

  /** Starts a server on a fresh free port (or `port`), waits until it answers PING, and stops it in `t`'s teardown. */
  static async start (t: Teardown | undefined, options: RedisServerOptions = {}): Promise<RedisServer> {
    const tool = options.tool ?? 'redis-server'
    const binary = redisBinary(tool)
    if (binary === undefined) throw new Error(`${tool} not found`)
    const server = new RedisServer(binary, options.port ?? await freePort(), options)
    t?.teardown(() => server.stop('SIGKILL'))
    if (options.running !== false) await server.start()
    return server
  }

  get url (): string {
    return `redis://127.0.0.1:${this.port}`
  }

  get running (): boolean {
    return this.#running !== undefined
  }

  /** redis-server's pid while it runs (a benchmark counts its CPU apart). */
  get pid (): number | undefined {
    return this.#running?.pid
  }

  /** What `redis-server --version` says its version is. */
  async version (): Promise<string> {
    return await new Promise<string>(resolve => {
      const child = spawn(this.binary, ['--version'], { stdio: ['ignore', 'pipe', 'ignore'] })
      let out = ''
      child.stdout.on('data', (chunk: Buffer) => { out += chunk.toString() })
      child.on('close', () => { resolve(/v=(\S+)/.exec(out)?.[1] ?? 'unknown') })
    })
  }

  /** Starts (or restarts) the server on its port; resolves once it answers PING. */
  async start (): Promise<void> {
    if (this.#running !== undefined) return
    this.#output = ''
    const shell = spawn('/bin/sh', ['-c', WATCHDOG, this.binary, ...this.#config,
      '--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
      '--daemonize', 'no', '--protected-mode', 'no', '--loglevel', 'warning', ...this.#args
    ], { stdio: ['pipe', 'pipe', 'pipe'] })
    shell.stdin!.on('error', () => {})
    shell.stderr!.on('data', (chunk: Buffer) => { this.#output += chunk.toString('utf8') })
    const exited = once(shell, 'exit')
    let gone = false
    void exited.then(() => { gone = true })
    const pid = await new Promise<number | undefined>(resolve => {
      let text = ''
      shell.stdout!.on('data', (chunk: Buffer) => {
        text += chunk.toString('utf8')
        if (text.includes('\n')) resolve(Number(text.trim()))
      })
      void exited.then(() => { resolve(undefined) })
    })
    if (pid === undefined || !Number.isInteger(pid)) {
      shell.stdin!.end()
      throw new Error(`${this.tool} on port ${this.port} did not start:\n${this.#output.slice(-2000)}`)
    }
    const running: Running = { shell, pid, exited }
    this.#running = running
    live.add(pid)
    void exited.then(() => {
      live.delete(pid)
      shell.stdin!.end() // releases the watcher
      if (this.#running === running) this.#running = undefined
    })
    const deadline = Date.now() + STARTUP_TIMEOUT_MS
    while (!await pingRedis(this.port)) {
      if (gone) throw new Error(`${this.tool} on port ${this.port} exited before answering PING:\n${this.#output.slice(-2000)}`)
      if (Date.now() >= deadline) {
        await this.stop('SIGKILL')
        throw new Error(`${this.tool} on port ${this.port} did not answer PING within ${STARTUP_TIMEOUT_MS} ms:\n${this.#output.slice(-2000)}`)
      }
      await sleep(10)
    }
  }

  /**
   * Stops the server and waits until it is gone (its port is then free). SIGTERM is a clean shutdown
   * (clients see their connections closed); SIGKILL a crash. Resolves at once when not running.
   */
  async stop (signal: 'SIGTERM' | 'SIGKILL' = 'SIGTERM'): Promise<void> {
    const running = this.#running
    if (running === undefined) return
    const kill = (sig: NodeJS.Signals): void => {
      try { process.kill(running.pid, sig) } catch {}
    }
    kill(signal)
    const timer = setTimeout(() => { kill('SIGKILL') }, STOP_TIMEOUT_MS)
    await running.exited
    clearTimeout(timer)
    if (this.#running === running) this.#running = undefined
  }

  async restart (): Promise<void> {
    await this.stop()
    await this.start()
  }
}
