/**
 * A bare HTTP server on 127.0.0.1:0 whose answers the test writes route by route: an authorization
 * server that answers 204, stalls or cuts its answer mid-body, redirects, serves metadata naming
 * another issuer, and so on, which the real one (test/helpers/authorization-server.ts) cannot be made
 * to do. It counts the requests per path and keeps the last body posted to each.
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Teardown } from './teardown.js'

/** Answers one request; `body` is what the client sent (read in full before the route runs). */
export type Route = (request: IncomingMessage, response: ServerResponse, body: string) => void

export interface ScriptedServer {
  /** `http://127.0.0.1:<port>`. */
  readonly origin: string
  /** Sets (or replaces) the route of `path`; a path without one answers 404. */
  route: (path: string, route: Route) => void
  /** How many requests `path` received. */
  hits: (path: string) => number
  /** The body last posted to `path`, and its headers. */
  lastRequest: (path: string) => { body: string, headers: IncomingMessage['headers'] } | undefined
}

/** Answers `value` as JSON, with `headers`. */
export function json (value: unknown, headers: Record<string, string> = {}): Route {
  return (_request, response) => {
    response.writeHead(200, { 'content-type': 'application/json', ...headers })
    response.end(JSON.stringify(value))
  }
}

/** Starts a server with `routes` (by path), stopped at the end of the test, its connections cut. */
export async function scriptedServer (t: Teardown, routes: Record<string, Route> = {}): Promise<ScriptedServer> {
  const table = new Map(Object.entries(routes))
  const hits = new Map<string, number>()
  const requests = new Map<string, { body: string, headers: IncomingMessage['headers'] }>()
  const server = http.createServer((request, response) => {
    const path = new URL(request.url ?? '/', 'http://x').pathname
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => { chunks.push(chunk) })
    request.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8')
      hits.set(path, (hits.get(path) ?? 0) + 1)
      requests.set(path, { body, headers: request.headers })
      const route = table.get(path)
      if (route === undefined) {
        response.writeHead(404).end()
        return
      }
      route(request, response, body)
    })
  })
  await new Promise<void>(resolve => { server.listen(0, '127.0.0.1', resolve) })
  t.teardown(async () => {
    server.closeAllConnections()
    await new Promise(resolve => { server.close(resolve) })
  })
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    route: (path, route) => { table.set(path, route) },
    hits: path => hits.get(path) ?? 0,
    lastRequest: path => requests.get(path)
  }
}
