/**
 * Messages addressed to one node of the cluster, by topic: never broadcast (`RedisBus.messages()`).
 * Kept free of the bus's imports: the published types reach this interface, and they must not need
 * ioredis, an optional peer.
 */
export interface NodeMessages {
  /**
   * Publishes `message` to `node` only. Resolves true once that node's subscription has it, false when
   * nobody received it (the node is not listening, or the bus is down: counted); never rejects.
   */
  send: (node: string, topic: string, message: Record<string, unknown>) => Promise<boolean>
  /** Hands this node's messages of `topic` to `handler`. */
  receive: (topic: string, handler: (message: Record<string, unknown>) => void) => void
}
