import { randomBytes } from 'node:crypto'
import type { FastifyReply } from 'fastify'
import type { NodeMessages } from '../cluster/node-messages.js'
import { ErrorCode, ProtocolError } from '../core/jsonrpc.js'
import type { EventPosition } from '../protocol/event-id.js'
import type { ResumableStreams } from './resumable-streams.js'
import type { StreamConnection } from './resumable-stream.js'
import type { SseResponse } from './sse-response.js'

const TOPIC = 'resumable-stream'
/** A node relaying a stream renews its hold this often; the node holding the stream lets go after `LEASE_MS` without one. */
export const RELAY_LEASE_MS = 10_000
/** How long a resume waits for the node holding the stream to answer. */
const ANSWER_TIMEOUT_MS = 5_000

/**
 * What one node tells another about a stream the first holds and the second relays. The holding node
 * numbers what it sends a consumer (`seq`, from 0): node messages keep their order, but a Redis
 * reconnect can retry one behind a later one (docs/resumability.md).
 */
type RelayMessage =
  | { type: 'resume', consumer: string, from: string, stream: string, after: number, scope: string, session: string | null }
  | { type: 'accepted', consumer: string, seq: number }
  | { type: 'refused', consumer: string, status: number, code: number, message: string }
  | { type: 'frames', consumer: string, seq: number, frames: string[] }
  | { type: 'end', consumer: string, seq: number }
  | { type: 'renew', consumers: string[] }
  | { type: 'detach', consumer: string }
  | { type: 'delivered', consumer: string }

/** A resume waiting for the holding node's answer: the reply its stream will go out on. */
interface PendingResume {
  owner: string
  reply: FastifyReply
  accept: () => void
  refuse: (error: ProtocolError) => void
}

/** A stream this node relays to its client: where the holding node's frames go. */
interface RelayedStream {
  owner: string
  response: SseResponse
  /** The `seq` the holding node's next message must have. */
  next: number
  /** The holding node sent the end: a close after all of it went out is a delivery. */
  ended: boolean
}

/**
 * Resumes on any node (docs/resumability.md): a `Last-Event-ID` that names a stream held by another
 * node is taken there over the cluster's node messages. That node replays and carries the stream to
 * this one, which writes it to its client; this node renews its hold while the client reads, and says
 * when the client left (the stream pauses there) or took the response (the stream ends there). Events
 * stay on the node running the request: they matter only while it runs, and no Redis write is made per
 * event for a stream nobody resumed elsewhere.
 */
export class StreamRelay {
  readonly #streams: ResumableStreams
  readonly #messages: NodeMessages
  readonly #node: string
  readonly #keepAliveMs: number
  /** Held here, read elsewhere: the connection each consumer has, and when it last renewed. */
  readonly #served = new Map<string, { connection: RemoteConnection, renewedAt: number }>()
  /** Read here, held elsewhere. */
  readonly #relayed = new Map<string, RelayedStream>()
  readonly #pending = new Map<string, PendingResume>()
  #timer: NodeJS.Timeout | undefined

  constructor (streams: ResumableStreams, messages: NodeMessages, node: string, keepAliveMs: number) {
    this.#streams = streams
    this.#messages = messages
    this.#node = node
    this.#keepAliveMs = keepAliveMs
    // Anything else on the channel (another program on the same Redis, another version) is ignored.
    messages.receive(TOPIC, message => {
      const relayMessage = relayMessageOf(message)
      if (relayMessage !== undefined) this.#receive(relayMessage)
    })
  }

  startTimers (): void {
    this.#timer = setInterval(() => { this.#tick() }, RELAY_LEASE_MS / 3)
    this.#timer.unref()
  }

  close (): void {
    clearInterval(this.#timer)
    for (const relayed of this.#relayed.values()) relayed.response.end()
    for (const { connection } of this.#served.values()) connection.closed(false)
  }

  /**
   * Resumes on `reply` the stream `position` names, held by another node: refused there (its status
   * and message, nothing written), or carried here. A node that cannot be reached is a 503.
   */
  async resume (position: EventPosition, scope: string, session: string | undefined, reply: FastifyReply): Promise<void> {
    const consumer = randomBytes(12).toString('base64url')
    const answered = new Promise<void>((resolve, reject) => {
      this.#pending.set(consumer, { owner: position.node, reply, accept: resolve, refuse: reject })
    })
    let timer: NodeJS.Timeout | undefined
    try {
      const sent = await this.#send(position.node, {
        type: 'resume', consumer, from: this.#node, stream: position.stream, after: position.position, scope, session: session ?? null
      })
      if (!sent) throw unreachable()
      await Promise.race([answered, new Promise<void>((_resolve, reject) => { timer = setTimeout(() => { reject(unreachable()) }, ANSWER_TIMEOUT_MS) })])
    } catch (error) {
      this.#pending.delete(consumer)
      // A late acceptance must not leave the stream held for a consumer that is gone.
      void this.#send(position.node, { type: 'detach', consumer })
      throw error
    } finally {
      clearTimeout(timer)
    }
  }

  /** The holding node accepted: the stream opens now, before the frames that follow in the same read. */
  #accepted (consumer: string, seq: number, { owner, reply, accept }: PendingResume): void {
    const response = this.#streams.resumeResponse(reply, this.#keepAliveMs)
    const relayed: RelayedStream = { owner, response, next: seq + 1, ended: false }
    this.#relayed.set(consumer, relayed)
    response.onClose(finished => {
      this.#relayed.delete(consumer)
      void this.#send(owner, { type: relayed.ended && finished ? 'delivered' : 'detach', consumer })
    })
    accept()
  }

  #receive (message: RelayMessage): void {
    switch (message.type) {
      case 'resume': this.#serve(message); break
      case 'accepted': {
        const pending = this.#pending.get(message.consumer)
        if (pending === undefined) break
        this.#pending.delete(message.consumer)
        this.#accepted(message.consumer, message.seq, pending)
        break
      }
      case 'refused': {
        const pending = this.#pending.get(message.consumer)
        this.#pending.delete(message.consumer)
        pending?.refuse(new ProtocolError(message.code, message.message, { httpStatus: message.status }))
        break
      }
      case 'frames': {
        const relayed = this.#inOrder(message)
        if (relayed !== undefined) for (const frame of message.frames) relayed.response.write(frame)
        break
      }
      case 'end': {
        const relayed = this.#inOrder(message)
        if (relayed === undefined) break
        relayed.ended = true
        relayed.response.end()
        break
      }
      case 'renew': {
        const now = performance.now()
        for (const consumer of message.consumers) {
          const served = this.#served.get(consumer)
          if (served !== undefined) served.renewedAt = now
        }
        break
      }
      case 'detach':
        this.#served.get(message.consumer)?.connection.closed(false)
        break
      case 'delivered':
        this.#served.get(message.consumer)?.connection.closed(true)
        break
    }
  }

  /**
   * The relayed stream `message` is for, when it comes next in the holding node's order. One that comes
   * out of it (one before it was retried, or lost) cuts the client's connection instead: the client
   * resumes after the last event it got, and the stream pauses on the holding node meanwhile.
   */
  #inOrder (message: { consumer: string, seq: number }): RelayedStream | undefined {
    const relayed = this.#relayed.get(message.consumer)
    if (relayed === undefined) return undefined
    if (message.seq === relayed.next) {
      relayed.next++
      return relayed
    }
    this.#relayed.delete(message.consumer)
    relayed.response.destroy()
    return undefined
  }

  /** Another node resumes a stream held here: refused with the status it would get here, or carried to it. */
  #serve ({ consumer, from, stream: name, after, scope, session }: Extract<RelayMessage, { type: 'resume' }>): void {
    let stream
    try {
      stream = this.#streams.find({ stream: name, position: after, node: this.#node }, scope, session ?? undefined)
    } catch (error) {
      const refusal = error as ProtocolError
      void this.#send(from, { type: 'refused', consumer, status: refusal.httpStatus, code: refusal.code, message: refusal.message })
      return
    }
    const connection = new RemoteConnection(consumer, async message => await this.#send(from, message))
    this.#served.set(consumer, { connection, renewedAt: performance.now() })
    connection.onClose(() => { this.#served.delete(consumer) })
    connection.accept()
    this.#streams.attach(stream, connection, after)
  }

  /** Renews what this node relays; lets go of what it serves to a node that stopped renewing. */
  #tick (): void {
    const byOwner = new Map<string, string[]>()
    for (const [consumer, { owner }] of this.#relayed) {
      const list = byOwner.get(owner)
      if (list === undefined) byOwner.set(owner, [consumer])
      else list.push(consumer)
    }
    for (const [owner, consumers] of byOwner) void this.#send(owner, { type: 'renew', consumers })
    const lapsed = performance.now() - RELAY_LEASE_MS
    for (const { connection, renewedAt } of this.#served.values()) if (renewedAt < lapsed) connection.closed(false)
  }

  async #send (node: string, message: RelayMessage): Promise<boolean> {
    return await this.#messages.send(node, TOPIC, message)
  }
}

const isString = (value: unknown): value is string => typeof value === 'string'

/** `message` as a relay message when it has the shape of one, field by field; undefined otherwise. */
function relayMessageOf (message: Record<string, unknown>): RelayMessage | undefined {
  const { type, consumer } = message
  if (type === 'renew') return Array.isArray(message.consumers) && message.consumers.every(isString) ? { type, consumers: message.consumers } : undefined
  if (!isString(consumer)) return undefined
  const { seq } = message
  const numbered = Number.isSafeInteger(seq) && (seq as number) >= 0
  switch (type) {
    case 'detach': case 'delivered':
      return { type, consumer }
    case 'accepted': case 'end':
      return numbered ? { type, consumer, seq: seq as number } : undefined
    case 'frames':
      return numbered && Array.isArray(message.frames) && message.frames.every(isString) ? { type, consumer, seq: seq as number, frames: message.frames } : undefined
    case 'refused': {
      const { status, code, message: text } = message
      return Number.isInteger(status) && (status as number) >= 400 && (status as number) < 600 && Number.isInteger(code) && isString(text)
        ? { type, consumer, status: status as number, code: code as number, message: text }
        : undefined
    }
    case 'resume': {
      const { from, stream, after, scope, session } = message
      return isString(from) && isString(stream) && Number.isSafeInteger(after) && (after as number) >= 0 && isString(scope) && (session === null || isString(session))
        ? { type, consumer, from, stream, after: after as number, scope, session }
        : undefined
    }
    default:
      return undefined
  }
}

function unreachable (): ProtocolError {
  return new ProtocolError(ErrorCode.ServerError, 'Service Unavailable: the server node holding this stream cannot be reached; try again', {
    httpStatus: 503, headers: { 'retry-after': '1' }
  })
}

/** A stream held here, read by a client of another node: its frames go there in node messages, batched per tick, numbered. */
class RemoteConnection implements StreamConnection {
  readonly #consumer: string
  readonly #send: (message: RelayMessage) => Promise<boolean>
  #seq = 0
  #frames: string[] | undefined
  #handlers: Array<(finished: boolean) => void> = []
  #closed = false

  constructor (consumer: string, send: (message: RelayMessage) => Promise<boolean>) {
    this.#consumer = consumer
    this.#send = send
  }

  write (frame: string): void {
    if (this.#closed) return
    if (this.#frames !== undefined) {
      this.#frames.push(frame)
      return
    }
    this.#frames = [frame]
    queueMicrotask(() => { this.#flush() })
  }

  /** Tells the other node the resume is taken: sent before the replay. */
  accept (): void {
    this.#deliver({ type: 'accepted', consumer: this.#consumer, seq: this.#seq++ })
  }

  end (): void {
    if (this.#closed) return
    this.#flush()
    this.#deliver({ type: 'end', consumer: this.#consumer, seq: this.#seq++ })
  }

  onClose (handler: (finished: boolean) => void): void {
    this.#handlers.push(handler)
  }

  /** The other node said its client left (or took all of it), or stopped renewing, or cannot be reached. */
  closed (finished: boolean): void {
    if (this.#closed) return
    this.#closed = true
    for (const handler of this.#handlers) handler(finished)
  }

  #flush (): void {
    const frames = this.#frames
    this.#frames = undefined
    if (frames !== undefined && !this.#closed) this.#deliver({ type: 'frames', consumer: this.#consumer, seq: this.#seq++, frames })
  }

  #deliver (message: RelayMessage): void {
    void this.#send(message).then(received => { if (!received) this.closed(false) })
  }
}
