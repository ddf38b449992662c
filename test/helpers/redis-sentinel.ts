/**
 * A real Redis Sentinel topology for the tests: a primary, a replica of it (`--replicaof`) and three
 * `redis-sentinel`s monitoring them with a quorum of 2, on free loopback ports; ready when every
 * sentinel knows the primary, the replica (in sync) and the two other sentinels. A test kills the
 * primary and waits for the sentinels to promote the replica; everything is stopped and its temporary
 * directory (the sentinels' configuration files, which they rewrite) removed in `t`'s teardown.
 *
 * Every process is a `RedisServer` (redis-server.ts): free ports below the ephemeral range, killed at exit.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { askRedis, RedisServer } from './redis-server.js'
import type { Teardown } from './teardown.js'
import { waitFor } from './wait.js'

/** How long the primary may be unreachable before a sentinel deems it down: short, for a quick failover. */
const DOWN_AFTER_MS = 1000
/**
 * A failover that stalls is given up after this long, and a sentinel tries another one after twice
 * as long (after a split vote, say): short enough for a retry to fit in a test.
 */
const FAILOVER_TIMEOUT_MS = 5000
/** Sentinels find each other through hello messages sent every 2 s; a loaded machine takes longer. */
const READY_TIMEOUT_MS = 30_000
/** Down detection, the vote, and a retry of it after a split vote. */
const FAILOVER_WAIT_MS = 25_000
const POLL_MS = 50
const SENTINELS = 3

export interface Address {
  host: string
  port: number
}

export interface RedisSentinel {
  /** The sentinels, for `new Redis({ sentinels, name })`. */
  readonly sentinels: Address[]
  /** The name the sentinels monitor the primary under. */
  readonly name: string
  /** The primary and the replica it started with (which is which changes with a failover). */
  readonly servers: readonly RedisServer[]
  /** The primary's address as a sentinel tells it (`SENTINEL get-master-addr-by-name`). */
  primary: () => Promise<Address>
  /** SIGKILL of the current primary; resolves once it is gone. */
  killPrimary: () => Promise<void>
  /**
   * Resolves when every running sentinel names a new primary and that one answers ROLE as a master;
   * the ms since `killPrimary` (or since the call).
   */
  waitForFailover: () => Promise<number>
}

/** A flat `[field, value, …]` answer (SENTINEL MASTER, each of SENTINEL REPLICAS) as a map. */
function record (answer: unknown): Map<string, string> {
  const map = new Map<string, string>()
  if (!Array.isArray(answer)) return map
  for (let i = 0; i + 1 < answer.length; i += 2) map.set(String(answer[i]), String(answer[i + 1]))
  return map
}

export async function startRedisSentinel (t: Teardown, options: { name?: string } = {}): Promise<RedisSentinel> {
  const name = options.name ?? 'mymaster'
  const dir = await mkdtemp(join(tmpdir(), 'redis-sentinel-'))
  const processes: RedisServer[] = []
  // Registered before anything starts, so that a start failing halfway still cleans up.
  t.teardown(async () => {
    await Promise.all(processes.map(server => server.stop('SIGKILL')))
    await rm(dir, { recursive: true, force: true })
  })

  // A replica's first sync starts at once, not after the default 5 s (either may be the primary later).
  const replication = ['--repl-diskless-sync-delay', '0', '--dir', dir]
  const primary = await RedisServer.start(t, { args: replication })
  processes.push(primary)
  const replica = await RedisServer.start(t, { args: [...replication, '--replicaof', '127.0.0.1', String(primary.port)] })
  processes.push(replica)
  const servers = [primary, replica]

  const sentinels: RedisServer[] = []
  for (let i = 0; i < SENTINELS; i++) {
    const config = join(dir, `sentinel-${i}.conf`)
    await writeFile(config, [
      `sentinel monitor ${name} 127.0.0.1 ${primary.port} 2`,
      `sentinel down-after-milliseconds ${name} ${DOWN_AFTER_MS}`,
      `sentinel failover-timeout ${name} ${FAILOVER_TIMEOUT_MS}`,
      `sentinel parallel-syncs ${name} 1`,
      ''
    ].join('\n'))
    const sentinel = await RedisServer.start(t, { tool: 'redis-sentinel', config, running: false, args: ['--dir', dir] })
    processes.push(sentinel)
    sentinels.push(sentinel)
  }
  await Promise.all(sentinels.map(async sentinel => { await sentinel.start() }))

  const ask = async (server: RedisServer, command: string, ...args: string[]): Promise<unknown> =>
    server.running ? await askRedis(server.port, command, args).catch(() => undefined) : undefined

  /** The primary `sentinel` names, or undefined when it does not answer. */
  async function primaryOf (sentinel: RedisServer): Promise<Address | undefined> {
    const answer = await ask(sentinel, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name)
    if (!Array.isArray(answer) || answer.length !== 2) return undefined
    return { host: String(answer[0]), port: Number(answer[1]) }
  }

  /** The sentinel sees the primary up, the replica up and linked, and the two other sentinels. */
  async function knowsAll (sentinel: RedisServer): Promise<boolean> {
    const master = record(await ask(sentinel, 'SENTINEL', 'MASTER', name))
    if (master.get('flags') !== 'master' || master.get('num-slaves') !== '1' || master.get('num-other-sentinels') !== String(SENTINELS - 1)) return false
    const replicas = await ask(sentinel, 'SENTINEL', 'REPLICAS', name)
    if (!Array.isArray(replicas) || replicas.length !== 1) return false
    const seen = record(replicas[0])
    return seen.get('flags') === 'slave' && seen.get('master-link-status') === 'ok' && seen.get('port') === String(replica.port)
  }

  /** The replica's link to the primary is up and its first sync done. */
  async function replicaInSync (): Promise<boolean> {
    const info = await ask(replica, 'INFO', 'replication')
    return typeof info === 'string' && info.includes('master_link_status:up') && info.includes('master_sync_in_progress:0')
  }

  const ready = async (): Promise<boolean> => {
    if (!await replicaInSync()) return false
    for (const sentinel of sentinels) {
      if (!await knowsAll(sentinel)) return false
    }
    return true
  }
  if (!await waitFor(ready, READY_TIMEOUT_MS, POLL_MS)) {
    throw new Error(`the sentinels on ports ${sentinels.map(sentinel => sentinel.port).join(', ')} did not all see primary ${primary.port}, replica ${replica.port} and each other within ${READY_TIMEOUT_MS} ms`)
  }

  async function currentPrimary (): Promise<Address> {
    for (const sentinel of sentinels) {
      const address = await primaryOf(sentinel)
      if (address !== undefined) return address
    }
    throw new Error('no sentinel answers')
  }

  let killed: { port: number, at: number } | undefined

  return {
    sentinels: sentinels.map(sentinel => ({ host: '127.0.0.1', port: sentinel.port })),
    name,
    servers,
    primary: currentPrimary,
    async killPrimary () {
      const { port } = await currentPrimary()
      const server = servers.find(candidate => candidate.port === port)
      if (server === undefined) throw new Error(`the sentinels name ${port}, which is none of the servers`)
      killed = { port, at: performance.now() }
      await server.stop('SIGKILL')
    },
    async waitForFailover () {
      const since = killed?.at ?? performance.now()
      const oldPort = killed?.port ?? (await currentPrimary()).port
      const promoted = async (): Promise<boolean> => {
        let successor: number | undefined
        for (const sentinel of sentinels.filter(candidate => candidate.running)) {
          const port = (await primaryOf(sentinel))?.port
          if (port === undefined || port === oldPort || (successor !== undefined && port !== successor)) return false
          successor = port
        }
        const server = servers.find(candidate => candidate.port === successor)
        const role = server === undefined ? undefined : await ask(server, 'ROLE')
        return Array.isArray(role) && role[0] === 'master'
      }
      if (!await waitFor(promoted, FAILOVER_WAIT_MS, POLL_MS)) {
        throw new Error(`the sentinels did not promote a replica of the primary on port ${oldPort} within ${FAILOVER_WAIT_MS} ms`)
      }
      return performance.now() - since
    }
  }
}
