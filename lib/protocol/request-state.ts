import { createHash } from 'node:crypto'
import { isJsonObject, type JsonObject } from '../core/jsonrpc.js'
import { TokenSigner } from '../core/signed-token.js'

const VERSION = 1
const SEPARATOR = '.'
const BASE64URL = /^[A-Za-z0-9_-]+$/

/** What a request state binds: the request it belongs to, whose it is, how far it got, and until when. */
export interface RoundBinding {
  method: string
  /** The tool or prompt name, or the resource URI. */
  name: string
  /** Digest of the request's arguments (`digestOf`). */
  digest: string
  /** The scope of the request (`principal:…` or `ip:…`). */
  scope: string
}

export interface RoundState extends RoundBinding {
  /** Rounds completed so far (1 after the first `input_required`). */
  round: number
  /** `Date.now()` after which the state is refused. */
  expiresAt: number
  /** The answers collected in earlier rounds, by key. */
  answers: JsonObject
  /** What the round that issued the state asked, by key (digests of the questions). */
  asked: Record<string, string>
  /** The handler's own `ctx.state`. */
  state: unknown
}

/** JSON with object keys sorted at every depth, so equal arguments digest equally. */
function canonicalJson (value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`
  if (isJsonObject(value)) {
    return `{${Object.keys(value).sort().map(key => `${JSON.stringify(key)}:${canonicalJson(value[key])}`).join(',')}}`
  }
  return JSON.stringify(value) ?? 'null'
}

/** SHA-256 of a JSON value (arguments, a question) as canonical JSON, base64url. */
export function digestOf (args: unknown): string {
  return createHash('sha256').update(canonicalJson(args ?? null)).digest('base64url')
}

/**
 * `requestState` of modern multi-round-trip requests: `base64url(JSON) . base64url(HMAC-SHA256)`
 * under a key derived from the plugin's secret, so any node holding the secret continues any round and
 * no node stores anything. The MAC covers everything; the payload binds the request (method, name,
 * argument digest), the scope, the round and an expiry, and carries the answers so far.
 */
export class RequestStateCodec {
  readonly #signer: TokenSigner
  readonly #maxBytes: number

  /** `key`: derived from the plugin's secret for this use alone. */
  constructor (key: Buffer, maxBytes: number) {
    this.#signer = new TokenSigner(key)
    this.#maxBytes = maxBytes
  }

  /** The longest state sealed or opened (`maxRequestStateBytes`). */
  get maxBytes (): number {
    return this.#maxBytes
  }

  /** The sealed state, or undefined when it would be longer than the bound. */
  seal (state: RoundState): string | undefined {
    const { method, name, digest, scope, round, expiresAt, answers, asked } = state
    const payload = Buffer.from(JSON.stringify({ v: VERSION, m: method, n: name, d: digest, p: scope, r: round, e: expiresAt, a: answers, q: asked, s: state.state }))
      .toString('base64url')
    const sealed = `${payload}${SEPARATOR}${this.#signer.sign(payload)}`
    return sealed.length <= this.#maxBytes ? sealed : undefined
  }

  /** The state, when `text` is one this key sealed for `binding` and it has not expired; else undefined. */
  open (text: unknown, binding: RoundBinding, now = Date.now()): RoundState | undefined {
    if (typeof text !== 'string' || text.length > this.#maxBytes) return undefined
    const [payload, mac, extra] = text.split(SEPARATOR)
    if (payload === undefined || mac === undefined || extra !== undefined || !BASE64URL.test(payload)) return undefined
    if (!this.#signer.verify(payload, mac)) return undefined
    let fields: unknown
    try {
      fields = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'))
    } catch {
      return undefined
    }
    if (!isJsonObject(fields) || fields.v !== VERSION || !isJsonObject(fields.a) || !isJsonObject(fields.q) ||
      typeof fields.r !== 'number' || typeof fields.e !== 'number' || !(fields.e > now) ||
      fields.m !== binding.method || fields.n !== binding.name || fields.d !== binding.digest || fields.p !== binding.scope) {
      return undefined
    }
    return { ...binding, round: fields.r, expiresAt: fields.e, answers: fields.a, asked: fields.q as Record<string, string>, state: fields.s }
  }
}
