import { STATUS_CODES, type ServerResponse } from 'node:http'
import type { FastifyBodyParser, FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction, HTTPMethods, onRequestAsyncHookHandler, onRequestHookHandler, RouteHandlerMethod } from 'fastify'
import type { CancellationRegistry } from '../lifecycle/registry.js'
import type { Authenticator } from '../identity/authenticator.js'
import type { RequestObserver } from '../observability/observer.js'
import type { Identity } from '../identity/identity.js'
import type { JsonLimits } from '../protocol/json-guard.js'
import type { ResponseMode } from './http-response-sink.js'
import type { OriginMatcher } from './origin-guard.js'
import type { Dispatcher } from '../dispatch/dispatcher.js'
import { ErrorCode, errorResponse, ProtocolError } from '../core/jsonrpc.js'
import { parseJson, toIncomingMessage } from '../protocol/message.js'
import { eraOf, HEADERLESS_LEGACY_VERSION, resumesStreams, type SupportedVersions } from '../protocol/versions.js'
import { BatchItemSink, MAX_BATCH_SIZE } from './batch-item-sink.js'
import { AcceptedResponseTypes, mediaType, type AcceptedResponses } from './media-types.js'
import { isAllowed } from './origin-guard.js'
import { HttpResponseSink } from './http-response-sink.js'
import type { ListenStreams } from '../events/listen-streams.js'
import type { SessionSubscriptions } from '../events/session-subscriptions.js'
import { bindEra } from '../protocol/era.js'
import { sanitizeText } from '../core/sanitize.js'
import { notAnEventId, type ResumableStreams } from './resumable-streams.js'
import type { StreamRelay } from './stream-relay.js'

const utf8 = new TextDecoder('utf-8', { fatal: true })

/**
 * The MCP endpoint as routes of an encapsulated Fastify context: POST carries JSON-RPC, every other
 * verb is 405. The context has its own body parser (raw bytes, strict UTF-8) and error handler, so the
 * application's parsers and error format never apply to MCP traffic and MCP's never leak out.
 */
/** What the endpoint reads of the plugin's settings. */
export interface EndpointSettings {
  path: string
  bodyLimit: number
  json: JsonLimits
  allowedOrigins: readonly OriginMatcher[]
  allowedHosts: readonly OriginMatcher[] | undefined
  responseMode: ResponseMode
  keepAliveMs: number
}

export interface EndpointParts {
  settings: EndpointSettings
  observer: RequestObserver
  dispatcher: Dispatcher
  registry: CancellationRegistry
  versions: SupportedVersions
  identity: Identity
  authenticator: Authenticator | undefined
  /** Legacy sessions' GET streams (with sessions and events); without, GET is a 405. */
  sessionStreams: ListenStreams | undefined
  /** Legacy sessions' subscriptions, dropped with their session. */
  subscriptions: SessionSubscriptions | undefined
  /** This node's resumable legacy streams (with `resumability`). */
  resumableStreams: ResumableStreams | undefined
  /** Resumes of streams other nodes hold (with `resumability` and `redis`). */
  streamRelay: StreamRelay | undefined
}

/** Every verb the endpoint answers: POST carries JSON-RPC, DELETE ends a legacy session, the others are 405. */
export const ENDPOINT_METHODS = ['POST', 'DELETE', 'GET', 'PUT', 'PATCH'] as const satisfies readonly HTTPMethods[]

export function registerEndpoint (fastify: FastifyInstance, parts: EndpointParts): void {
  const endpoint = new Endpoint(parts)
  const { settings, authenticator } = parts
  fastify.register(async scope => {
    scope.removeAllContentTypeParsers()
    // The raw bytes of any type (the route answers 415 itself). application/json is named as well:
    // Fastify caches the parser of a named type, but parses the header of every catch-all request.
    const rawBody = { parseAs: 'buffer', bodyLimit: settings.bodyLimit } as const
    const keep: FastifyBodyParser<Buffer> = (_request, body, done) => { done(null, body) }
    scope.addContentTypeParser('application/json', rawBody, keep)
    scope.addContentTypeParser('*', rawBody, keep)
    scope.setErrorHandler((error: Error & { statusCode?: number }, request, reply) => endpoint.fail(error, request, reply))
    // Origin first (before anything else is done for a request), then who the request speaks for.
    const onRequest: Array<onRequestHookHandler | onRequestAsyncHookHandler> = [endpoint.guard.bind(endpoint)]
    if (authenticator !== undefined) onRequest.push(authenticator.authenticate.bind(authenticator))
    scope.post(settings.path, { onRequest }, endpoint.post.bind(endpoint) as RouteHandlerMethod)
    scope.delete(settings.path, { onRequest }, endpoint.delete.bind(endpoint))
    scope.get(settings.path, { onRequest }, endpoint.get.bind(endpoint))
    scope.route({
      method: ['PUT', 'PATCH'],
      url: settings.path,
      onRequest,
      handler: (_request, reply) => endpoint.notAllowed(reply)
    })
  })
}

class Endpoint {
  readonly #settings: EndpointSettings
  readonly #dispatcher: Dispatcher
  readonly #versions: SupportedVersions
  readonly #identity: Identity
  readonly #observer: RequestObserver
  readonly #authenticator: Authenticator | undefined
  readonly #sessionStreams: ListenStreams | undefined
  readonly #subscriptions: SessionSubscriptions | undefined
  readonly #resumableStreams: ResumableStreams | undefined
  readonly #streamRelay: StreamRelay | undefined
  readonly #accepted = new AcceptedResponseTypes()
  /**
   * The 'close' listener of every response, one for all (none is made per request): a response that
   * closed before it finished means the client left.
   */
  readonly #responseClosed: (this: ServerResponse) => void

  constructor ({ settings, dispatcher, versions, identity, registry, observer, authenticator, sessionStreams, subscriptions, resumableStreams, streamRelay }: EndpointParts) {
    this.#sessionStreams = sessionStreams
    this.#resumableStreams = resumableStreams
    this.#streamRelay = streamRelay
    this.#subscriptions = subscriptions
    this.#observer = observer
    this.#authenticator = authenticator
    this.#settings = settings
    this.#dispatcher = dispatcher
    this.#versions = versions
    this.#identity = identity
    this.#responseClosed = function () {
      if (!this.writableFinished) registry.disconnected(this.req)
    }
  }

  /** DNS-rebinding protection, before the body is read: a present, unlisted Origin (or Host) is a 403. */
  guard (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
    const { origin, host } = request.headers
    const { allowedOrigins, allowedHosts } = this.#settings
    if (origin !== undefined && !isAllowed(origin, allowedOrigins)) {
      this.#send(reply, 403, 'Forbidden: Origin not allowed')
    } else if (allowedHosts !== undefined && (host === undefined || !isAllowed(host, allowedHosts))) {
      this.#send(reply, 403, 'Forbidden: Host not allowed')
    } else {
      done()
    }
  }

  /** Synchronous when the handler answers synchronously; otherwise a promise of the reply. */
  post (request: FastifyRequest<{ Body: Buffer | undefined }>, reply: FastifyReply): Promise<FastifyReply> | undefined {
    try {
      if (mediaType(request.headers['content-type']) !== 'application/json') {
        throw new ProtocolError(ErrorCode.InvalidRequest, 'Unsupported Media Type: Content-Type must be application/json', { httpStatus: 415 })
      }
      const accepted = this.#accepted.of(request.headers.accept)
      if (!accepted.json && !accepted.sse) {
        throw new ProtocolError(ErrorCode.InvalidRequest, 'Not Acceptable: Accept must allow application/json or text/event-stream', { httpStatus: 406 })
      }
      const body = parseJson(decodeBody(request.body), this.#settings.json)
      const pending = Array.isArray(body) ? this.#batch(body, request, reply) : this.#single(body, request, reply, accepted)
      if (pending === undefined) return undefined
      // Only a request still running can see its client leave: for a POST with a body, the response's
      // 'close' before it finished is the only reliable sign of that (request 'close' fired once the
      // body was read). No event can come between the handler's start and this line.
      reply.raw.on('close', this.#responseClosed)
      return pending.then(() => reply, (error: unknown) => this.#answerProtocolError(error, reply))
    } catch (error) {
      this.#answerProtocolError(error, reply)
      return undefined
    }
  }

  /** Writes a `ProtocolError` with its HTTP status (unless a response already went out); rethrows anything else. */
  #answerProtocolError (error: unknown, reply: FastifyReply): FastifyReply {
    if (!(error instanceof ProtocolError)) throw error
    if (!reply.sent) void reply.code(error.httpStatus).headers(error.headers ?? {}).send(error.toResponse())
    return reply
  }

  /** DELETE ends a legacy session (revoked on every node); without sessions there is nothing to delete. */
  async delete (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    const { sessions } = this.#identity
    if (sessions === undefined) return this.notAllowed(reply)
    try {
      const session = await sessions.terminate(request, request.mcpPrincipal?.id ?? null)
      await this.#subscriptions?.ended(session.id)
      return await reply.code(204).send()
    } catch (error) {
      return this.#answerProtocolError(error, reply)
    }
  }

  /**
   * Legacy era: `GET` with `Last-Event-ID` resumes the stream the id names (with `resumability`); with
   * sessions, `GET` with `Accept: text/event-stream` opens the session's standalone stream of server
   * events. Without sessions no other stream can belong to a client (405), and a modern client has no
   * GET (405, as the 2026-07-28 transport says).
   */
  async get (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    const version = request.headers['mcp-protocol-version']
    if (typeof version === 'string' && eraOf(version) === 'modern') return this.notAllowed(reply)
    const lastEventId = request.headers['last-event-id']
    if (lastEventId !== undefined && this.#resumableStreams !== undefined) return await this.#resume(lastEventId, request, reply, this.#resumableStreams)
    const streams = this.#sessionStreams
    const { sessions } = this.#identity
    if (streams === undefined || sessions === undefined) return this.notAllowed(reply)
    try {
      const accepted = this.#streamAccepted(request)
      const session = sessions.current(request, request.mcpPrincipal?.id ?? null)
      const scope = this.#identity.resolve(request, 'legacy', '', undefined)
      const resumable = typeof version === 'string' && resumesStreams(version) ? this.#resumableStreams : undefined
      const sink = new HttpResponseSink(reply, { ...this.#settings, responseMode: 'sse' }, accepted, this.#observer, resumable)
      await streams.openSession({ sessionId: session.id, expiresAt: session.expiresAt, scope, sink })
      return reply
    } catch (error) {
      return this.#answerProtocolError(error, reply)
    }
  }

  /**
   * Resumes the stream a `Last-Event-ID` names, after that event: what it missed, then the rest live,
   * until its response; through the node holding it, when that is another. The id must verify for the
   * request's scope and session; every refusal comes before anything is written.
   */
  async #resume (lastEventId: string | string[], request: FastifyRequest, reply: FastifyReply, streams: ResumableStreams): Promise<FastifyReply> {
    try {
      this.#streamAccepted(request)
      const scope = this.#identity.resolve(request, 'legacy', '', undefined)
      const session = request.mcpSessionId ?? undefined
      const position = typeof lastEventId === 'string' ? streams.ids.verify(lastEventId, scope, session) : undefined
      if (position === undefined) throw notAnEventId()
      if (position.node === streams.ids.node) {
        const stream = streams.find(position, scope, session)
        streams.attach(stream, streams.resumeResponse(reply, this.#settings.keepAliveMs), position.position)
      } else if (this.#streamRelay === undefined) {
        throw new ProtocolError(ErrorCode.InvalidRequest, 'Not Found: this stream is held by another server node; without redis only that node can resume it', { httpStatus: 404 })
      } else {
        await this.#streamRelay.resume(position, scope, session, reply)
      }
      this.#observer.streamResumed('resumed')
      return reply
    } catch (error) {
      this.#observer.streamResumed('refused')
      return this.#answerProtocolError(error, reply)
    }
  }

  /** What a GET stream accepts: `text/event-stream`, or a 406; its version header checked as a POST's is (an unsupported one is a 400). */
  #streamAccepted (request: FastifyRequest): AcceptedResponses {
    const accepted = this.#accepted.of(request.headers.accept)
    if (!accepted.sse) {
      throw new ProtocolError(ErrorCode.InvalidRequest, 'Not Acceptable: a GET stream needs Accept: text/event-stream', { httpStatus: 406 })
    }
    bindEra('', undefined, undefined, request.headers, this.#versions)
    return accepted
  }

  notAllowed (reply: FastifyReply): FastifyReply {
    return this.#send(reply.header('allow', 'POST'), 405, 'Method Not Allowed: the MCP endpoint accepts POST only')
  }

  /**
   * Errors of the framework (body too large, aborted upload…) and of the plugins in front of the
   * endpoint (`@fastify/rate-limit`'s 429, `@fastify/under-pressure`'s 503: refusals they meant, with
   * their own headers) as JSON-RPC errors with their status; our own bugs as a bare 500 and -32603.
   */
  fail (error: Error & { statusCode?: number }, request: FastifyRequest, reply: FastifyReply): FastifyReply {
    const status = error.statusCode ?? 500
    if (status === 429 || status === 503) {
      const reason = STATUS_CODES[status]!
      const message = error.message === reason || error.message === '' ? reason : `${reason}: ${sanitizeText(error.message)}`
      return reply.code(status).send(errorResponse(undefined, { code: ErrorCode.ServerError, message }))
    }
    if (status < 400 || status >= 500) {
      request.log.error({ err: error }, 'MCP endpoint failed')
      return reply.code(500).send(errorResponse(undefined, { code: ErrorCode.InternalError, message: 'Internal error' }))
    }
    const message = status === 413 ? `Payload Too Large: the body limit is ${this.#settings.bodyLimit} bytes` : 'Bad Request'
    return this.#send(reply, status, message)
  }

  #single (body: unknown, request: FastifyRequest, reply: FastifyReply, accepted: AcceptedResponses): Promise<void> | undefined {
    const message = toIncomingMessage(body)
    switch (message.kind) {
      case 'response':
        // A legacy client's answer to an ask of a handler (elicitation, sampling, roots).
        this.#dispatcher.answer(message, request)
        void reply.code(202).send()
        return undefined
      case 'notification':
        return this.#dispatcher.notify(message, request).then(() => { void reply.code(202).send() })
      case 'request': {
        const prepared = this.#dispatcher.prepare(message, request)
        const { sessions } = this.#identity
        if (sessions !== undefined && prepared.binding.era === 'legacy' && message.method === 'initialize') {
          reply.header('mcp-session-id', sessions.mint(request.mcpPrincipal?.id ?? null, message.params.capabilities))
        }
        const { binding } = prepared
        const resumable = binding.era === 'legacy' && message.method !== 'initialize' && resumesStreams(binding.version) ? this.#resumableStreams : undefined
        const sink = new HttpResponseSink(reply, this.#settings, accepted, this.#observer, resumable)
        if ('stream' in prepared.method) return this.#dispatcher.listen(prepared, request, sink)
        return this.#dispatcher.run(prepared, request, sink)
      }
    }
  }

  /** JSON-RPC batches exist only in 2025-03-26: they are answered as one JSON array, notifications dropped. */
  async #batch (items: unknown[], request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const version = request.headers['mcp-protocol-version'] ?? HEADERLESS_LEGACY_VERSION
    if (version !== HEADERLESS_LEGACY_VERSION || !this.#versions.hasLegacy(version)) {
      throw new ProtocolError(ErrorCode.InvalidRequest, `Invalid Request: batches are accepted only under protocol version ${HEADERLESS_LEGACY_VERSION}`, { httpStatus: 400 })
    }
    if (items.length === 0 || items.length > MAX_BATCH_SIZE) {
      throw new ProtocolError(ErrorCode.InvalidRequest, `Invalid Request: a batch holds 1 to ${MAX_BATCH_SIZE} messages`, { httpStatus: 400 })
    }
    const refusal = this.#batchScopeRefusal(items, request)
    if (refusal !== undefined) throw refusal
    const slots = items.map(() => new BatchItemSink())
    await Promise.all(items.map((item, i) => this.#batchItem(item, request, slots[i]!)))
    const responses = slots.flatMap(slot => slot.response === undefined ? [] : [slot.response])
    if (responses.length === 0) void reply.code(202).send()
    else void reply.code(200).header('content-type', 'application/json; charset=utf-8').send(JSON.stringify(responses))
  }

  /**
   * A batch is refused whole, before any item runs, when one of its requests lacks an OAuth scope: only
   * a 401/403 carries the challenge a client steps up with (an error inside a 200 array carries none),
   * and the challenge lists every scope the batch needs, so that the new token serves all of it.
   */
  #batchScopeRefusal (items: unknown[], request: FastifyRequest): ProtocolError | undefined {
    if (this.#authenticator === undefined) return undefined
    const needed = new Set<string>()
    for (const item of items) {
      let message
      try {
        message = toIncomingMessage(item)
      } catch (error) {
        // A malformed item is answered by its own error in the array.
        if (error instanceof ProtocolError) continue
        throw error
      }
      if (message.kind === 'request') for (const scope of this.#dispatcher.neededScopes(message)) needed.add(scope)
    }
    return this.#authenticator.scopeRefusal(request.mcpPrincipal, [...needed])
  }

  async #batchItem (item: unknown, request: FastifyRequest, slot: BatchItemSink): Promise<void> {
    try {
      const message = toIncomingMessage(item)
      if (message.kind === 'notification') await this.#dispatcher.notify(message, request)
      if (message.kind === 'response') this.#dispatcher.answer(message, request)
      if (message.kind !== 'request') return
      if (message.method === 'initialize') {
        throw new ProtocolError(ErrorCode.InvalidRequest, 'Invalid Request: initialize must not be part of a batch', { id: message.id })
      }
      const prepared = this.#dispatcher.prepare(message, request)
      if (prepared.binding.era !== 'legacy') {
        throw new ProtocolError(ErrorCode.InvalidRequest, 'Invalid Request: modern requests cannot be batched', { id: message.id })
      }
      await this.#dispatcher.run(prepared, request, slot)
    } catch (error) {
      if (!(error instanceof ProtocolError)) throw error
      slot.respond(error.toResponse())
    }
  }

  #send (reply: FastifyReply, status: number, message: string): FastifyReply {
    return reply.code(status).send(errorResponse(undefined, { code: ErrorCode.InvalidRequest, message }))
  }
}

function decodeBody (body: Buffer | undefined): string {
  try {
    return body === undefined ? '' : utf8.decode(body)
  } catch {
    throw new ProtocolError(ErrorCode.ParseError, 'Parse error: the body is not valid UTF-8', { httpStatus: 400 })
  }
}
