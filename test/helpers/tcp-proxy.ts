/**
 * A TCP proxy on 127.0.0.1 for fault injection between the plugin and a real server (Redis): every
 * chunk in either direction is held for a latency (fixed, or drawn per chunk), in order, and the proxy
 * can be paused (chunks are held until `resume`) or cut (every connection destroyed). Order is kept
 * per direction, so a delayed link stays a valid TCP stream: it is slow, never corrupt.
 */
import net from 'node:net'
import type { AddressInfo } from 'node:net'
import type { Teardown } from './teardown.js'

/** Milliseconds to hold the next chunk: a number, or a function drawn per chunk (jitter). */
export type Latency = number | (() => number)

interface Direction {
  /** When the last chunk queued in this direction is due: a later chunk is never due before it. */
  dueAt: number
  queue: Array<{ chunk: Buffer, dueAt: number }>
  timer: NodeJS.Timeout | undefined
  readonly to: net.Socket
}

export class TcpProxy {
  readonly #server: net.Server
  readonly #target: { host: string, port: number }
  readonly #links = new Set<{ up: Direction, down: Direction, client: net.Socket, upstream: net.Socket }>()
  #latency: Latency = 0
  #paused = false

  private constructor (target: { host: string, port: number }) {
    this.#target = target
    this.#server = net.createServer(client => { this.#accept(client) })
  }

  /** A proxy to `127.0.0.1:port`, listening on a free loopback port, closed in `t`'s teardown. */
  static async start (t: Teardown | undefined, port: number, latency: Latency = 0): Promise<TcpProxy> {
    const proxy = new TcpProxy({ host: '127.0.0.1', port })
    proxy.#latency = latency
    await new Promise<void>(resolve => { proxy.#server.listen({ host: '127.0.0.1', port: 0 }, resolve) })
    t?.teardown(async () => { await proxy.close() })
    return proxy
  }

  get port (): number {
    return (this.#server.address() as AddressInfo).port
  }

  get url (): string {
    return `redis://127.0.0.1:${this.port}`
  }

  get latency (): Latency {
    return this.#latency
  }

  /** Sets the latency of chunks queued from now on. */
  set latency (latency: Latency) {
    this.#latency = latency
  }

  /** Holds every chunk (both directions, every connection) until `resume`. */
  pause (): void {
    this.#paused = true
  }

  resume (): void {
    this.#paused = false
    for (const link of this.#links) {
      this.#flush(link.up)
      this.#flush(link.down)
    }
  }

  /** Destroys every open connection (the peers see a reset); new ones are accepted. */
  cut (): void {
    for (const link of [...this.#links]) {
      link.client.destroy()
      link.upstream.destroy()
    }
  }

  async close (): Promise<void> {
    this.cut()
    await new Promise<void>(resolve => { this.#server.close(() => { resolve() }) })
  }

  #accept (client: net.Socket): void {
    const upstream = net.connect(this.#target)
    const link = { client, upstream, up: this.#direction(upstream), down: this.#direction(client) }
    this.#links.add(link)
    const end = (): void => {
      this.#links.delete(link)
      clearTimeout(link.up.timer)
      clearTimeout(link.down.timer)
      client.destroy()
      upstream.destroy()
    }
    for (const socket of [client, upstream]) {
      socket.setNoDelay(true)
      socket.on('error', end)
      socket.on('close', end)
    }
    client.on('data', (chunk: Buffer) => { this.#queue(link.up, chunk) })
    upstream.on('data', (chunk: Buffer) => { this.#queue(link.down, chunk) })
  }

  #direction (to: net.Socket): Direction {
    return { dueAt: 0, queue: [], timer: undefined, to }
  }

  #queue (direction: Direction, chunk: Buffer): void {
    const latency = typeof this.#latency === 'function' ? this.#latency() : this.#latency
    direction.dueAt = Math.max(direction.dueAt, Date.now() + Math.max(0, latency))
    direction.queue.push({ chunk, dueAt: direction.dueAt })
    this.#flush(direction)
  }

  /** Writes every chunk that is due, and sets a timer for the next one. */
  #flush (direction: Direction): void {
    clearTimeout(direction.timer)
    direction.timer = undefined
    if (this.#paused) return
    const now = Date.now()
    while (direction.queue.length > 0 && direction.queue[0]!.dueAt <= now) {
      const { chunk } = direction.queue.shift()!
      if (!direction.to.destroyed) direction.to.write(chunk)
    }
    const next = direction.queue[0]
    if (next !== undefined) direction.timer = setTimeout(() => { this.#flush(direction) }, next.dueAt - now)
  }
}
