import { ErrorCode, invalidParams, ProtocolError, type JsonObject } from '../core/jsonrpc.js'
import { sessionKey, type SubscriptionStore } from './subscription-store.js'

export interface SessionSubscriptionsSettings {
  maxUriBytes: number
  maxSubscriptionsPerSession: number
}

/**
 * Legacy `resources/subscribe` and `resources/unsubscribe`: kept per session, as long as the session
 * lives, in a store every node reads (so the node holding the session's stream honours a subscribe
 * POSTed to another). Without a session there is no stream to deliver on: the request is acknowledged
 * and nothing is kept.
 */
export class SessionSubscriptions {
  readonly #store: SubscriptionStore
  readonly #settings: SessionSubscriptionsSettings
  readonly #expiryOf: (sessionId: string) => number

  constructor (store: SubscriptionStore, settings: SessionSubscriptionsSettings, expiryOf: (sessionId: string) => number) {
    this.#store = store
    this.#settings = settings
    this.#expiryOf = expiryOf
  }

  async subscribe (sessionId: string | null, params: JsonObject): Promise<JsonObject> {
    const uri = subscribedUri(params, this.#settings.maxUriBytes)
    if (sessionId === null) return {}
    const outcome = await available(this.#store.subscribe(sessionKey(sessionId), uri, this.#expiryOf(sessionId)))
    if (outcome === 'full') {
      const { maxSubscriptionsPerSession } = this.#settings
      throw new ProtocolError(ErrorCode.InternalError, `Subscription limit reached: this session has ${maxSubscriptionsPerSession} subscriptions (maxSubscriptionsPerSession)`)
    }
    return {}
  }

  async unsubscribe (sessionId: string | null, params: JsonObject): Promise<JsonObject> {
    const uri = subscribedUri(params, this.#settings.maxUriBytes)
    if (sessionId !== null) await available(this.#store.unsubscribe(sessionKey(sessionId), uri))
    return {}
  }

  /** The session was terminated: its subscriptions go, and its stream ends on whichever node holds it. */
  async ended (sessionId: string): Promise<void> {
    await this.#store.drop(sessionKey(sessionId)).catch(() => {})
  }
}

/** The `uri` of a `resources/subscribe` or `resources/unsubscribe`, checked (-32602), with sessions or without. */
export function subscribedUri (params: JsonObject, maxUriBytes: number): string {
  const { uri } = params
  if (typeof uri !== 'string' || uri === '' || Buffer.byteLength(uri) > maxUriBytes) throw invalidParams(`uri must be a string of 1 to ${maxUriBytes} bytes`)
  return uri
}

/** A store that cannot be reached (Redis down) is an ordinary JSON-RPC error the client may retry, not a 5xx. */
async function available<T> (pending: Promise<T>): Promise<T> {
  try {
    return await pending
  } catch {
    throw new ProtocolError(ErrorCode.InternalError, 'Subscriptions are unavailable: their store cannot be reached; try again shortly')
  }
}
