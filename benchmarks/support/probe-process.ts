import type { ChildProcess } from 'node:child_process'
import { ServerProcess, spawnServer } from './child-server.js'
import type { ProbeCommand, ProbeMessage } from '../servers/probe.js'

export { epochNow } from './child-server.js'

/**
 * `benchmarks/servers/probe.ts` in a process of its own, with an IPC channel for its reports (as
 * cross-node.ts does with its cluster nodes): the benchmark process is only the client.
 */
export class ProbeProcess extends ServerProcess {
  readonly #waiters = new Map<string, (message: ProbeMessage) => void>()
  readonly #errors: string[] = []

  private constructor (child: ChildProcess, port: number) {
    super(child, port)
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
    const { child, port } = await spawnServer(new URL('../servers/probe.ts', import.meta.url), env, nodeArgs, 'probe server')
    return new ProbeProcess(child, port)
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
    this.child.send(command)
  }

  protected async clockAt (seq: number): Promise<number> {
    const reply = this.next('clock', String(seq))
    this.send({ type: 'clock', seq })
    return (await reply).at
  }
}
