import type { RedisBus } from './redis-bus.js'

/** Messages addressed to one node of the cluster (over the Redis bus, `RedisBus`), by topic: never broadcast. */
export interface NodeMessages {
  /**
   * Publishes `message` to `node` only. Resolves true once that node's subscription has it, false when
   * nobody received it (the node is not listening, or the bus is down: counted); never rejects.
   */
  send: (node: string, topic: string, message: Record<string, unknown>) => Promise<boolean>
  /** Hands this node's messages of `topic` to `handler`. */
  receive: (topic: string, handler: (message: Record<string, unknown>) => void) => void
}

/** Node messages over the bus: each node listens on channels of its own, so a message is published to the node it is for, never broadcast. */
export function busMessages (bus: RedisBus): NodeMessages {
  return {
    send: async (node, topic, message) => await bus.publish(`${topic}:${node}`, message) > 0,
    receive: (topic, handler) => { bus.subscribe(`${topic}:${bus.nodeId}`, handler) }
  }
}
