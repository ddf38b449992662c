/**
 * A real Redis Cluster for the tests: `primaries` primaries with `replicasPerPrimary` replicas each
 * (3 and 1: six `redis-server`s), on free loopback ports, joined by `redis-cli --cluster create`, and
 * ready when every node says `cluster_state:ok`, agrees on who serves which slots and every replica is
 * in sync. A test kills a node (a crash by default), waits for its replica to be promoted and restarts
 * it; everything is stopped and its temporary directory removed in `t`'s teardown.
 *
 * Each node is a `RedisServer` (redis-server.ts): free ports below the ephemeral range, killed at exit.
 * The cluster bus port is chosen the same way (`--cluster-port`) instead of Redis' port + 10000, which
 * could land inside the ephemeral range or on a port in use.
 */
import { execFile } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { askRedis, freePort, redisBinary, RedisServer } from './redis-server.js'
import type { Teardown } from './teardown.js'
import { waitFor } from './wait.js'

/**
 * How long a node may be unreachable before the others mark it failed and its replica takes over.
 * Short, so that a failover takes seconds; not so short that a node a busy 2-core machine stalls
 * for a moment is failed over.
 */
const NODE_TIMEOUT_MS = 1000
/** Joining and syncing six nodes takes a few seconds; a loaded machine gets more. */
const READY_TIMEOUT_MS = 30_000
/** A failover takes the node timeout, about a second of election delay and the vote. */
const FAILOVER_TIMEOUT_MS = 20_000
const POLL_MS = 50

export type ClusterRole = 'primary' | 'replica'

/** A slot range, both ends included. */
type SlotRange = readonly [number, number]

/** One line of `CLUSTER NODES`: a node as the node asked sees it. */
interface NodeView {
  id: string
  port: number
  flags: string[]
  /** The id of its primary, for a replica. */
  primaryId: string | undefined
  slots: SlotRange[]
}

export class ClusterNode {
  readonly server: RedisServer
  /** The cluster bus port (`--cluster-port`). */
  readonly busPort: number
  /** The node's id (CLUSTER MYID); its nodes.conf keeps it across restarts. */
  id = ''
  /**
   * Its role when the helper last read the cluster: 'primary' while it serves slots. A primary whose
   * slots a replica took over is a 'replica' from then on, down or not: that is what it rejoins as.
   */
  role: ClusterRole = 'primary'
  /** The slot ranges (both ends included) it served when the helper last read the cluster. */
  slots: readonly SlotRange[] = []

  constructor (server: RedisServer, busPort: number) {
    this.server = server
    this.busPort = busPort
  }

  get port (): number {
    return this.server.port
  }

  get url (): string {
    return this.server.url
  }

  get running (): boolean {
    return this.server.running
  }
}

export interface RedisCluster {
  /** `redis://127.0.0.1:<port>` of every node, for `new Cluster(seeds)`. */
  readonly seeds: string[]
  readonly nodes: readonly ClusterNode[]
  /** The slot of `key` (CLUSTER KEYSLOT: hash tags included). */
  slotOf: (key: string) => Promise<number>
  /** The primary serving `slot` as a running node sees it (a failed primary until its replica takes over). */
  primaryForSlot: (slot: number) => Promise<ClusterNode>
  primaryFor: (key: string) => Promise<ClusterNode>
  /** Stops `node` and waits until it is gone: SIGKILL is a crash, SIGTERM a clean shutdown. */
  kill: (node: ClusterNode, signal?: 'SIGKILL' | 'SIGTERM') => Promise<void>
  /**
   * Starts `node` again on its port (stopping it first, cleanly, if it runs) and waits until the
   * cluster is ok with it back, in sync if it is a replica.
   */
  restart: (node: ClusterNode) => Promise<void>
  /**
   * Resolves when a replica of `oldPrimary` serves its slots, answers ROLE as a master and every
   * running node says `cluster_state:ok`; the ms since `kill(oldPrimary)` (or since the call).
   */
  waitForFailover: (oldPrimary: ClusterNode) => Promise<number>
}

export interface RedisClusterOptions {
  primaries?: number
  replicasPerPrimary?: number
  /** More `redis-server` arguments for every node (e.g. `--rename-command SPUBLISH ''`, to be a Redis without sharded pub/sub). */
  args?: readonly string[]
}

/** Parses `CLUSTER NODES`: `<id> <ip:port@bus[,hostname]> <flags> <primary|-> <ping> <pong> <epoch> <link> <slot>…`. */
function parseNodes (text: string): NodeView[] {
  return text.split('\n').filter(line => line.trim() !== '').map(line => {
    const [id = '', address = '', flags = '', primaryId = '-', , , , , ...slots] = line.trim().split(' ')
    return {
      id,
      port: Number(/:(\d+)@/.exec(address)?.[1]),
      flags: flags.split(','),
      primaryId: primaryId === '-' ? undefined : primaryId,
      // A slot being migrated ([slot->-id]) is not served by anyone else yet: skipped.
      slots: slots.filter(slot => !slot.startsWith('[')).map(slot => {
        const [from, to = from] = slot.split('-').map(Number) as [number, number?]
        return [from, to] as const
      })
    }
  })
}

function serves (view: NodeView, slot: number): boolean {
  return view.flags.includes('master') && view.slots.some(([from, to]) => slot >= from && slot <= to)
}

/** `field:value` lines (CLUSTER INFO, INFO) as a map. */
function fields (text: string): Map<string, string> {
  return new Map(text.split('\r\n').filter(line => line.includes(':')).map(line => {
    const at = line.indexOf(':')
    return [line.slice(0, at), line.slice(at + 1)]
  }))
}

/** A node's answer, or undefined when it does not answer (down, stalled, or refusing the command). */
async function ask (node: ClusterNode, command: string, ...args: Array<string | number>): Promise<unknown> {
  if (!node.running) return undefined
  return await askRedis(node.port, command, args).catch(() => undefined)
}

export async function startRedisCluster (t: Teardown, options: RedisClusterOptions = {}): Promise<RedisCluster> {
  const primaries = options.primaries ?? 3
  const replicasPerPrimary = options.replicasPerPrimary ?? 1
  // redis-cli --cluster create refuses fewer than three primaries.
  if (!Number.isInteger(primaries) || primaries < 3) throw new Error('a Redis Cluster needs at least 3 primaries')
  if (!Number.isInteger(replicasPerPrimary) || replicasPerPrimary < 0) throw new Error('replicasPerPrimary is a count')
  const cli = redisBinary('redis-cli')
  if (cli === undefined) throw new Error('redis-cli not found')

  const dir = await mkdtemp(join(tmpdir(), 'redis-cluster-'))
  const nodes: ClusterNode[] = []
  // Registered before any node starts, so that a start failing halfway still cleans up.
  t.teardown(async () => {
    await Promise.all(nodes.map(node => node.server.stop('SIGKILL')))
    await rm(dir, { recursive: true, force: true })
  })
  const killedAt = new Map<ClusterNode, number>()

  const count = primaries * (1 + replicasPerPrimary)
  for (let i = 0; i < count; i++) {
    const port = await freePort()
    const busPort = await freePort()
    const server = await RedisServer.start(t, {
      port,
      running: false,
      args: [
        '--cluster-enabled', 'yes',
        '--cluster-config-file', join(dir, `nodes-${port}.conf`),
        '--cluster-node-timeout', String(NODE_TIMEOUT_MS),
        '--cluster-port', String(busPort),
        '--dir', dir,
        // A replica's first sync (and a returning node's) starts at once, not after the default 5 s.
        '--repl-diskless-sync-delay', '0',
        ...options.args ?? []
      ]
    })
    nodes.push(new ClusterNode(server, busPort))
  }
  await Promise.all(nodes.map(async node => { await node.server.start() }))

  try {
    await promisify(execFile)(cli, [
      '--cluster', 'create', ...nodes.map(node => `127.0.0.1:${node.port}`),
      '--cluster-replicas', String(replicasPerPrimary), '--cluster-yes'
    ], { timeout: READY_TIMEOUT_MS })
  } catch (error) {
    const { stdout = '', stderr = '' } = error as { stdout?: string, stderr?: string }
    throw new Error(`redis-cli --cluster create failed: ${String(error)}\n${stdout.slice(-2000)}${stderr.slice(-2000)}`)
  }

  const byId = (id: string | undefined): ClusterNode | undefined => nodes.find(node => node.id === id)
  const byPort = (port: number): ClusterNode | undefined => nodes.find(node => node.port === port)

  /** The cluster as `node` sees it, or undefined when it does not answer. */
  async function viewOf (node: ClusterNode): Promise<NodeView[] | undefined> {
    const text = await ask(node, 'CLUSTER', 'NODES')
    return typeof text === 'string' ? parseNodes(text) : undefined
  }

  /** The view of the first running node that answers. */
  async function anyView (): Promise<NodeView[]> {
    for (const node of nodes) {
      const view = await viewOf(node)
      if (view !== undefined) return view
    }
    throw new Error('no node of the cluster answers')
  }

  /** Takes ids and roles from a view. */
  function learn (view: readonly NodeView[]): void {
    for (const seen of view) {
      const node = byPort(seen.port)
      if (node === undefined) continue
      node.id = seen.id
      node.slots = seen.flags.includes('master') ? seen.slots : []
      node.role = node.slots.length > 0 ? 'primary' : 'replica'
    }
  }

  async function stateOk (node: ClusterNode): Promise<boolean> {
    const info = await ask(node, 'CLUSTER', 'INFO')
    return typeof info === 'string' && fields(info).get('cluster_state') === 'ok'
  }

  /** A running replica's link to its primary is up and its sync done; always true for a primary. */
  async function inSync (node: ClusterNode): Promise<boolean> {
    const info = await ask(node, 'INFO', 'replication')
    if (typeof info !== 'string') return false
    const replication = fields(info)
    if (replication.get('role') !== 'slave') return true
    return replication.get('master_link_status') === 'up' && replication.get('master_sync_in_progress') === '0'
  }

  /**
   * Every running node says `cluster_state:ok` and sees the same primaries serving the same slots,
   * the same replicas of each and no node failed but those down; every running replica is in sync.
   */
  async function settled (): Promise<boolean> {
    const running = nodes.filter(node => node.running)
    const views: NodeView[][] = []
    for (const node of running) {
      const view = await viewOf(node)
      if (view === undefined || !await stateOk(node) || !await inSync(node)) return false
      views.push(view)
    }
    const shape = (view: NodeView[]): string => view
      .map(seen => {
        const down = byPort(seen.port)?.running === false
        if (!down && seen.flags.some(flag => flag === 'fail' || flag === 'fail?' || flag === 'handshake' || flag === 'noaddr')) return 'unsettled'
        const role = seen.flags.includes('master') ? `primary ${seen.slots.map(range => range.join('-')).join(',')}` : `replica of ${seen.primaryId ?? '?'}`
        return `${seen.port} ${role}`
      })
      .sort()
      .join('\n')
    const [first, ...others] = views.map(shape)
    if (first === undefined || first.includes('unsettled') || views[0]!.length !== nodes.length) return false
    if (!others.every(other => other === first)) return false
    learn(views[0]!)
    return true
  }

  if (!await waitFor(settled, READY_TIMEOUT_MS, POLL_MS)) {
    throw new Error(`the Redis Cluster on ports ${nodes.map(node => node.port).join(', ')} did not settle within ${READY_TIMEOUT_MS} ms`)
  }
  const shards = nodes.filter(node => node.role === 'primary').length
  if (shards !== primaries) throw new Error(`the Redis Cluster has ${shards} primaries, not ${primaries}`)

  async function slotOf (key: string): Promise<number> {
    for (const node of nodes) {
      const slot = await ask(node, 'CLUSTER', 'KEYSLOT', key)
      if (typeof slot === 'number') return slot
    }
    throw new Error('no node of the cluster answers')
  }

  async function primaryForSlot (slot: number): Promise<ClusterNode> {
    const owner = byPort((await anyView()).find(seen => serves(seen, slot))?.port ?? -1)
    if (owner === undefined) throw new Error(`no primary serves slot ${slot}`)
    return owner
  }

  return {
    seeds: nodes.map(node => node.url),
    nodes,
    slotOf,
    primaryForSlot,
    primaryFor: async key => await primaryForSlot(await slotOf(key)),
    async kill (node, signal = 'SIGKILL') {
      killedAt.set(node, performance.now())
      await node.server.stop(signal)
    },
    async restart (node) {
      await node.server.restart()
      if (!await waitFor(settled, READY_TIMEOUT_MS, POLL_MS)) {
        throw new Error(`the Redis Cluster did not settle within ${READY_TIMEOUT_MS} ms of restarting the node on port ${node.port}`)
      }
    },
    async waitForFailover (oldPrimary) {
      const since = killedAt.get(oldPrimary) ?? performance.now()
      // Its slots as the helper last read them (the failover may be over already).
      const slot = oldPrimary.slots[0]?.[0]
      if (slot === undefined) throw new Error(`the node on port ${oldPrimary.port} served no slots`)
      const promoted = async (): Promise<boolean> => {
        const running = nodes.filter(node => node.running)
        let successor: ClusterNode | undefined
        for (const node of running) {
          const owner = (await viewOf(node))?.find(seen => serves(seen, slot))
          const candidate = byId(owner?.id)
          if (candidate === undefined || candidate === oldPrimary || owner?.flags.includes('fail') === true) return false
          if (successor !== undefined && successor !== candidate) return false
          successor = candidate
          if (!await stateOk(node)) return false
        }
        const role = successor === undefined ? undefined : await ask(successor, 'ROLE')
        return Array.isArray(role) && role[0] === 'master'
      }
      if (!await waitFor(promoted, FAILOVER_TIMEOUT_MS, POLL_MS)) {
        throw new Error(`no replica of the primary on port ${oldPrimary.port} took over its slots within ${FAILOVER_TIMEOUT_MS} ms`)
      }
      const elapsed = performance.now() - since
      learn(await anyView())
      return elapsed
    }
  }
}
