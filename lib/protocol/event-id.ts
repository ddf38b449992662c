import { randomBytes } from 'node:crypto'
import { TokenSigner } from '../core/signed-token.js'

const VERSION = 'e1'
const STREAM_BYTES = 16 // 128 bits: no two streams of a session share a name
/** Canonical form only: version . stream . position (base 36) . node . MAC, all base64url. */
const EVENT_ID = /^e1\.([A-Za-z0-9_-]{22})\.(0|[1-9a-z][0-9a-z]{0,10})\.([0-9A-Za-z_-]{1,40})\.([A-Za-z0-9_-]{43})$/
const MAX_LENGTH = 160

/** Where a verified event id points: after which event of which stream, held by which node. */
export interface EventPosition {
  /** The response stream the event belongs to (the specification's "per-stream cursor"). */
  stream: string
  /** The event's place in its stream: 0 is the priming event, each later event one more. */
  position: number
  /** The node that holds the stream: a resume landing elsewhere is taken there. */
  node: string
}

/**
 * SSE event ids of legacy (2025-11-25) streams, minted so that any node can judge a `Last-Event-ID`
 * before looking anything up: the stream's random name, the event's position, the node holding the
 * stream, and an HMAC-SHA256 over the stream, the node and the scope and session of the request whose
 * stream it is. A forged or altered id, or one presented by another scope or session, does not verify.
 * The MAC is made once per stream, not per event (an HMAC is most of what an event would cost): a
 * client can change only the position of an id of its own stream, which the node holding it refuses
 * beyond the stream's latest event and which otherwise replays that client's own events. The ids of one
 * session never repeat across its streams, as 2025-11-25 `basic/transports` requires
 * (https://modelcontextprotocol.io/specification/2025-11-25/basic/transports#resumability-and-redelivery).
 */
export class EventIds {
  readonly #signer: TokenSigner
  readonly node: string

  /** `key`: derived from the plugin's secret for this use alone. */
  constructor (key: Buffer, node: string) {
    this.#signer = new TokenSigner(key)
    this.node = node
  }

  /** A new stream's name, held by this node. */
  newStream (): string {
    return randomBytes(STREAM_BYTES).toString('base64url')
  }

  /** The id of each event of `stream`, which this node holds for `scope` (and `session`, when there is one). */
  of (stream: string, scope: string, session: string | undefined): (position: number) => string {
    const prefix = `${VERSION}.${stream}.`
    const suffix = `.${this.node}.${this.#signer.sign(`${VERSION}.${stream}.${this.node}`, scope, session)}`
    return position => prefix + position.toString(36) + suffix
  }

  /** Where `id` points, when this deployment minted it for `scope` and `session`; undefined for anything else. */
  verify (id: string, scope: string, session: string | undefined): EventPosition | undefined {
    if (id.length > MAX_LENGTH) return undefined
    const match = EVENT_ID.exec(id)
    if (match === null) return undefined
    const [, stream, position, node, mac] = match as unknown as [string, string, string, string, string]
    if (!this.#signer.verify(`${VERSION}.${stream}.${node}`, mac, scope, session)) return undefined
    return { stream, position: parseInt(position, 36), node }
  }
}
