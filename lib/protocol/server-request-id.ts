import { randomBytes } from 'node:crypto'
import { TokenSigner } from '../core/signed-token.js'
import type { InputRequest } from './input-requests.js'

type InputMethod = InputRequest['method']

const VERSION = 'a1'
const RANDOM_BYTES = 16 // 128 bits
const KIND_OF: Record<InputMethod, string> = { 'elicitation/create': 'e', 'sampling/createMessage': 's', 'roots/list': 'r' }
const METHOD_OF: Record<string, InputMethod> = { e: 'elicitation/create', s: 'sampling/createMessage', r: 'roots/list' }
/** Canonical form only: version . kind . node . random . MAC, all base64url. */
const SERVER_REQUEST_ID = /^(a1\.([esr])\.([0-9A-Za-z_-]{1,40})\.[A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})$/
const MAX_LENGTH = 160

/** What a verified server-request id tells the node that receives its answer. */
export interface ServerRequestIdParts {
  /** What was asked: the answer is checked against it before it goes anywhere. */
  method: InputMethod
  /** The node waiting for the answer. */
  node: string
}

/**
 * Ids of the legacy era's requests to the client (elicitation, sampling, roots), minted so that the
 * node receiving the answer needs no shared table to trust it: 128 random bits, what was asked, the
 * node that waits, and an HMAC-SHA256 over those and the scope of the request that asked. An answer is
 * accepted only from the same scope, a forged or foreign id is refused before anything is looked up
 * or published, and the answer goes to the node named in the id, never broadcast.
 */
export class ServerRequestIds {
  readonly #signer: TokenSigner
  readonly node: string

  /** `key`: derived from the plugin's secret for this use alone. */
  constructor (key: Buffer, node: string) {
    this.#signer = new TokenSigner(key)
    this.node = node
  }

  mint (method: InputMethod, scope: string): string {
    const body = `${VERSION}.${KIND_OF[method]}.${this.node}.${randomBytes(RANDOM_BYTES).toString('base64url')}`
    return `${body}.${this.#signer.sign(body, scope)}`
  }

  /** The id's parts, when this deployment's key minted it for `scope`; undefined for anything else. */
  verify (id: unknown, scope: string): ServerRequestIdParts | undefined {
    if (typeof id !== 'string' || id.length > MAX_LENGTH) return undefined
    const match = SERVER_REQUEST_ID.exec(id)
    if (match === null) return undefined
    const [, body, kind, node, mac] = match as unknown as [string, string, string, string, string]
    if (!this.#signer.verify(body, mac, scope)) return undefined
    return { method: METHOD_OF[kind]!, node }
  }
}
