import type { ServerOptions } from 'node:http'

export interface HttpTimeouts {
  requestTimeout: number
  connectionTimeout: number
  http: ServerOptions
}

export interface HttpTimeoutInputs {
  /** How long a client may take to send a whole request, headers and body (MCP_REQUEST_TIMEOUT_MS). */
  requestTimeoutMs: number
  /** The plugin's maxStreamLifetimeMs and cancelTimeoutMs, as the demo sets them. */
  maxStreamLifetimeMs: number
  cancelTimeoutMs: number
}

/** The longest the demo waits for a request's headers, when the request timeout is longer. */
const MAX_HEADERS_TIMEOUT_MS = 10_000

/**
 * The demo's socket timeouts. Fastify's `requestTimeout` defaults to 0, so a body
 * sent a byte at a time holds a connection for ever. Node checks it only every
 * `connectionsCheckingInterval` (30 s by default), and when `headersTimeout` (60 s by default) is the
 * longer of the two it applies that one to the whole request, so a 30 s `requestTimeout` alone closes
 * a trickling body only after 60 to 90 s (ConnectionsList::Expired in
 * https://github.com/nodejs/node/blob/v20.x/src/node_http_parser.cc swaps the two; measured in
 * test/e2e/body-timeouts.test.ts). Hence headers within min(10 s, the request timeout), checked every tenth
 * of it. Once the body is in, the request timeout no longer applies: a tool call may take its whole
 * lifetime to answer.
 *
 * `connectionTimeout` is Fastify's socket inactivity timeout (`server.setTimeout`): it bounds a
 * connection on which nothing moves, such as a client that stopped reading its response, and a
 * destroyed socket is a disconnect, which cancels the call. A JSON-mode call writes nothing until its
 * result, for up to the lifetime (the sweep cancels within a tenth of it, the kill timeout ends it), so
 * the timeout is twice the lifetime plus the kill timeout: longer than any legitimate silence.
 */
export function httpTimeouts ({ requestTimeoutMs, maxStreamLifetimeMs, cancelTimeoutMs }: HttpTimeoutInputs): HttpTimeouts {
  return {
    requestTimeout: requestTimeoutMs,
    connectionTimeout: 2 * maxStreamLifetimeMs + cancelTimeoutMs,
    http: {
      headersTimeout: Math.min(MAX_HEADERS_TIMEOUT_MS, requestTimeoutMs),
      connectionsCheckingInterval: Math.ceil(requestTimeoutMs / 10)
    }
  }
}
