/**
 * `rediss://`: the plugin talks to Redis over TLS. A certificate authority made for the test signs the
 * certificate of a `redis-server`'s TLS port; two demo nodes in child processes trust that
 * authority (NODE_EXTRA_CA_CERTS, as an operator with a private CA would) and are given
 * `MCP_REDIS_URL=rediss://localhost:<port>`: both become ready, a task created on one is read on the
 * other, and a cancel POSTed to one stops a call on the other. A plain `redis://` to the same port never
 * connects: the node serves, not ready.
 */
import { execFile } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { startDemoChild, type DemoChild } from '../helpers/demo-child.js'
import { rawPost } from '../helpers/http.js'
import { cancelNotification, toolCall } from '../helpers/jsonrpc.js'
import { freePort, RedisServer, redisSkipReason } from '../helpers/redis-server.js'
import { fetchSender, TaskClient } from '../helpers/tasks.js'
import { waitFor } from '../helpers/wait.js'

const skip = redisSkipReason(t)
const SECRET = 'redis-tls-test-secret-0123456789abcdef0123'
const exec = promisify(execFile)
const openssl = async (args: string[]): Promise<void> => { await exec('openssl', args) }

/** A CA and a certificate it signs for localhost and 127.0.0.1, in `dir`. */
async function certificates (dir: string): Promise<{ ca: string, cert: string, key: string }> {
  const file = (name: string): string => join(dir, name)
  await openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=test CA', '-keyout', file('ca.key'), '-out', file('ca.crt')])
  await openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-keyout', file('redis.key'), '-out', file('redis.csr')])
  await writeFile(file('san.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n')
  await openssl(['x509', '-req', '-in', file('redis.csr'), '-CA', file('ca.crt'), '-CAkey', file('ca.key'), '-CAcreateserial', '-days', '1', '-extfile', file('san.ext'), '-out', file('redis.crt')])
  return { ca: file('ca.crt'), cert: file('redis.crt'), key: file('redis.key') }
}

async function ready (node: DemoChild): Promise<boolean> {
  return (await fetch(new URL('/ready', node.url))).status === 200
}

t.test('rediss://: two demo nodes on a Redis reached over TLS', { skip }, async t => {
  const dir = await mkdtemp(join(tmpdir(), 'redis-tls-'))
  t.teardown(async () => { await rm(dir, { recursive: true, force: true }) })
  const { ca, cert, key } = await certificates(dir)
  const tlsPort = await freePort()
  await RedisServer.start(t, { args: ['--tls-port', String(tlsPort), '--tls-cert-file', cert, '--tls-key-file', key, '--tls-ca-cert-file', ca, '--tls-auth-clients', 'no'] })
    .catch((error: unknown) => { throw new Error(`redis-server with TLS: ${String(error)}`) })
  const env = { MCP_REDIS_URL: `rediss://localhost:${tlsPort}`, MCP_SECRET: SECRET, NODE_EXTRA_CA_CERTS: ca }
  const [a, b] = await Promise.all([startDemoChild(t, env), startDemoChild(t, env)])
  t.ok(await waitFor(async () => await ready(a) && await ready(b), 10_000), 'both nodes are ready: connected over TLS')

  const tasks = { a: new TaskClient(fetchSender(a.url)), b: new TaskClient(fetchSender(b.url)) }
  const taskId = await tasks.a.create('render', { frames: 2 })
  t.equal((await tasks.b.get(taskId)).body.result?.taskId, taskId, 'a task created on A is read on B')

  const call = rawPost(a.url, toolCall('tls-sleep', 'sleep', { ms: 30_000 }))
  const ended = (async () => { await call; return true })()
  const cancelled = await waitFor(async () => {
    await rawPost(b.url, cancelNotification('tls-sleep'))
    return await Promise.race([ended, new Promise<boolean>(resolve => { setTimeout(resolve, 200, false) })])
  }, 10_000)
  t.ok(cancelled, 'a cancel POSTed to B stops the call on A')
  t.equal((await call).status, 202, 'which is answered as a cancelled call')

  const plain = await startDemoChild(t, { MCP_REDIS_URL: `redis://localhost:${tlsPort}`, MCP_SECRET: SECRET })
  t.equal((await fetch(new URL('/health', plain.url))).status, 200, 'redis:// to the TLS port: the node serves')
  t.notOk(await ready(plain), 'but is not ready: it never connects')
})
