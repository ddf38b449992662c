/**
 * HTTP reverse proxies on loopback addresses of their own (all of 127.0.0.0/8 is local on Linux), so a
 * test sees real, distinct peer addresses along a chain: client → proxies → app.
 */
import { createServer, request as httpRequest } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Teardown } from './teardown.js'

/**
 * A proxy listening on `address` that forwards each request to `target` from `address`, appending the
 * address it was reached from to `X-Forwarded-For`, as nginx's `$proxy_add_x_forwarded_for` does.
 */
export async function forwardingProxy (t: Teardown, address: string, target: URL): Promise<URL> {
  const server = createServer((req, res) => {
    const peer = req.socket.remoteAddress ?? ''
    const before = req.headers['x-forwarded-for']
    const upstream = httpRequest({
      host: target.hostname,
      port: target.port,
      path: req.url,
      method: req.method,
      localAddress: address,
      agent: false,
      headers: { ...req.headers, 'x-forwarded-for': before === undefined ? peer : `${String(before)}, ${peer}` }
    }, response => {
      res.writeHead(response.statusCode ?? 502, response.headers)
      response.pipe(res)
    })
    upstream.on('error', () => { res.destroy() })
    req.pipe(upstream)
  })
  await new Promise<void>(resolve => { server.listen(0, address, resolve) })
  t.teardown(() => {
    server.closeAllConnections()
    server.close()
  })
  return new URL(`http://${address}:${(server.address() as AddressInfo).port}${target.pathname}`)
}

/** The chain's entry: `proxies` from the client's side to the app's, the last one facing `app`. */
export async function proxyChain (t: Teardown, proxies: readonly string[], app: URL): Promise<URL> {
  let target = app
  for (const address of [...proxies].reverse()) target = await forwardingProxy(t, address, target)
  return target
}
