/**
 * Real listening servers on 127.0.0.1:0, for what `inject` cannot show (disconnects, cancellation
 * timing, streams, the official clients): an app of the test's own, the bare plugin, or the demo
 * (example/app.ts). The plugin and the demo come with the `probe` tool and the demo's `sleep`.
 */
import type { AddressInfo, Socket } from 'node:net'
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import { buildApp as buildDemo, type DemoEnv } from '../../example/app.js'
import mcpCancellation, { type McpCancellationOptions } from '../../lib/index.js'
import { recordWire, type WireExchange } from './recorders.js'
import type { Teardown } from './teardown.js'
import { Probe, registerSleep } from './tools.js'

/**
 * Starts `app` on 127.0.0.1:0 (closed at the end of the test) and returns its MCP URL. At teardown,
 * connections on which no request ever arrived are destroyed first: undici opens one right after a
 * fetch is aborted, and Node does not count such a connection as idle, so `app.close()` would wait for
 * it until the headers timeout (60 s). Connections that carried a request must end by themselves.
 */
export async function listenOn (t: Teardown, app: FastifyInstance, backlog?: number): Promise<URL> {
  const sockets = new Set<Socket>()
  app.server.on('connection', (socket: Socket) => {
    sockets.add(socket)
    socket.once('close', () => { sockets.delete(socket) })
  })
  t.teardown(async () => {
    for (const socket of sockets) if (socket.bytesRead === 0) socket.destroy()
    await app.close()
  })
  await app.listen({ host: '127.0.0.1', port: 0, ...(backlog === undefined ? {} : { backlog }) })
  return new URL(`http://127.0.0.1:${portOf(app)}/mcp`)
}

/** A listening app's port. */
export function portOf (app: FastifyInstance): number {
  return (app.server.address() as AddressInfo).port
}

export interface Listening {
  app: FastifyInstance
  url: URL
  probe: Probe
}

/**
 * The bare plugin with `options`, the demo's `sleep`, the probe and whatever `setup` adds, on 127.0.0.1:0;
 * `before` runs on the app before the plugin is registered (other plugins, as an application would).
 */
export async function listenPlugin (t: Teardown, options: McpCancellationOptions = {}, fastifyOptions: FastifyServerOptions = {},
  setup?: (app: FastifyInstance) => void, before?: (app: FastifyInstance) => Promise<void>): Promise<Listening> {
  const app = Fastify({ logger: false, ...fastifyOptions })
  await before?.(app)
  await app.register(mcpCancellation, { serverInfo: { name: 'listening-plugin', version: '1.0.0' }, ...options })
  registerSleep(app)
  const probe = new Probe()
  probe.register(app)
  setup?.(app)
  return { app, url: await listenOn(t, app), probe }
}

/**
 * The demo server (example/app.ts, built from `env` as `npm start` builds it from the environment) plus
 * the probe and whatever `setup` adds, on 127.0.0.1:0; `wire` records every exchange with its endpoint.
 */
export async function listenDemo (t: Teardown, env: DemoEnv = {}, fastifyOptions: FastifyServerOptions = {},
  setup?: (app: FastifyInstance) => void): Promise<Listening & { wire: WireExchange[] }> {
  const app = await buildDemo(env, fastifyOptions)
  const wire = recordWire(app)
  const probe = new Probe()
  probe.register(app)
  setup?.(app)
  return { app, url: await listenOn(t, app), probe, wire }
}
