/**
 * trustProxy and the address scope (issue 19, item 4). With `trustProxy: true`, `request.ip` is the
 * leftmost X-Forwarded-For entry, which the client writes itself, so an anonymous client picks its own
 * scope. Measured here through real proxies on distinct loopback addresses, a client forging the
 * leftmost entry: what `request.ip` (so the scope `ip:<bucket>`) becomes for each MCP_TRUST_PROXY of the
 * demo and for what Fastify makes of a number; the demo's parsing of MCP_TRUST_PROXY; and the plugin's
 * warning at registration when every hop is trusted and anonymous requests are allowed.
 */
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import { buildApp } from '../../example/app.js'
import mcpCancellation, { type McpCancellationOptions } from '../../lib/index.js'
import { proxyChain } from '../helpers/forwarding-proxy.js'
import { postFrom } from '../helpers/http.js'
import { registerWhoami } from '../helpers/identity.js'
import { LEGACY_HEADERS, toolCall, type JsonRpcMessage } from '../helpers/jsonrpc.js'
import { listenOn } from '../helpers/listen.js'
import { captureLogs } from '../helpers/logs.js'

const CLIENT = '127.0.0.10'
const FORGED = '6.6.6.6'
const LOAD_BALANCER = '127.0.0.11'
const FRONT_PROXY = '127.0.0.12'
/** Addresses from the CDN's published range, 127.0.1.0/24: an edge and, for tiered caching, a shield. */
const CDN_EDGE = '127.0.1.7'
const CDN_SHIELD = '127.0.1.9'

/** Proxies from the client's side to the app's; the load balancer always faces the app. */
const TOPOLOGIES: Record<string, readonly string[]> = {
  direct: [],
  'one proxy': [LOAD_BALANCER],
  'two proxies': [FRONT_PROXY, LOAD_BALANCER],
  CDN: [CDN_EDGE, LOAD_BALANCER],
  'tiered CDN': [CDN_EDGE, CDN_SHIELD, LOAD_BALANCER]
}

/** What `request.ip` is, per topology, in the order of TOPOLOGIES. */
const MEASURED_IP: Array<[setting: string, ips: string[]]> = [
  ['MCP_TRUST_PROXY unset', [CLIENT, LOAD_BALANCER, LOAD_BALANCER, LOAD_BALANCER, LOAD_BALANCER]],
  ['MCP_TRUST_PROXY=true', [FORGED, FORGED, FORGED, FORGED, FORGED]],
  ['MCP_TRUST_PROXY=1', [FORGED, CLIENT, FRONT_PROXY, CDN_EDGE, CDN_SHIELD]],
  ['MCP_TRUST_PROXY=2', [FORGED, FORGED, CLIENT, CLIENT, CDN_EDGE]],
  [`MCP_TRUST_PROXY=${LOAD_BALANCER}`, [CLIENT, CLIENT, FRONT_PROXY, CDN_EDGE, CDN_SHIELD]],
  [`MCP_TRUST_PROXY=${LOAD_BALANCER},${FRONT_PROXY}`, [CLIENT, CLIENT, CLIENT, CDN_EDGE, CDN_SHIELD]],
  [`MCP_TRUST_PROXY=${LOAD_BALANCER},127.0.1.0/24`, [CLIENT, CLIENT, FRONT_PROXY, CLIENT, CLIENT]],
  ['Fastify trustProxy: 1 (a number)', [CLIENT, LOAD_BALANCER, LOAD_BALANCER, LOAD_BALANCER, LOAD_BALANCER]],
  ['Fastify trustProxy: \'1\' (the env string, passed straight)', [CLIENT, LOAD_BALANCER, LOAD_BALANCER, LOAD_BALANCER, LOAD_BALANCER]]
]

async function listening (t: Test, app: FastifyInstance): Promise<URL> {
  registerWhoami(app)
  return await listenOn(t, app)
}

/** The app a setting of MCP_TRUST_PROXY (the demo) or of Fastify's trustProxy (the bare plugin) makes. */
async function appFor (setting: string): Promise<FastifyInstance> {
  const env = /^MCP_TRUST_PROXY(?:=(.*))?/.exec(setting)
  if (env !== null) return await buildApp(env[1] === undefined ? {} : { MCP_TRUST_PROXY: env[1] })
  const trustProxy = setting.includes('\'1\'') ? '1' : 1
  const app = Fastify({ logger: false, trustProxy: trustProxy as FastifyServerOptions['trustProxy'] })
  await app.register(mcpCancellation, { serverInfo: { name: 'trust-proxy', version: '1.0.0' } })
  return app
}

/** The scope the app gives a client at CLIENT that forges X-Forwarded-For, reached through `proxies`. */
async function scopeThrough (t: Test, proxies: readonly string[], app: URL): Promise<string | undefined> {
  const entry = await proxyChain(t, proxies, app)
  const response = await postFrom(CLIENT, entry, toolCall(1, 'whoami'), { ...LEGACY_HEADERS, 'x-forwarded-for': FORGED })
  if (response.status !== 200) return `HTTP ${response.status}`
  const text = (JSON.parse(response.text) as JsonRpcMessage).result?.content?.[0]?.text
  return (JSON.parse(String(text)) as { scope?: string }).scope
}

t.test('request.ip behind one proxy, two, and a CDN, for each setting, a client forging the leftmost X-Forwarded-For', async t => {
  const names = Object.keys(TOPOLOGIES)
  const rows: string[] = [`| setting | ${names.join(' | ')} |`, `|---|${names.map(() => '---').join('|')}|`]
  for (const [setting, expected] of MEASURED_IP) {
    const app = await listening(t, await appFor(setting))
    const scopes: Array<string | undefined> = []
    for (const name of names) scopes.push(await scopeThrough(t, TOPOLOGIES[name]!, app))
    t.same(scopes, expected.map(ip => `ip:${ip}`), setting)
    rows.push(`| ${setting} | ${scopes.map(scope => String(scope).replace(/^ip:/, '')).join(' | ')} |`)
  }
  t.comment(['request.ip (the scope is ip:<it>); client ' + CLIENT + ', forging ' + FORGED, ...rows].join('\n'))
})

t.test('MCP_TRUST_PROXY: a hop count, proxy addresses or CIDRs; anything else fails at startup', async t => {
  for (const value of ['0', '1', '3', '10.0.0.1', '10.0.0.1, 10.0.0.2', '10.0.0.0/8,fd00::/8', '2001:db8::1', 'loopback,10.0.0.1', 'false', '']) {
    const app = await buildApp({ MCP_TRUST_PROXY: value })
    t.teardown(() => app.close())
    t.pass(`${JSON.stringify(value)} is accepted`)
  }
  for (const value of ['yes', 'TRUE', '1.5', '-1', '01x', '10.0.0.300', '10.0.0.0/33', '10.0.0.0/0', 'fd00::/129', '10.0.0.1,,10.0.0.2', '10.0.0.1;10.0.0.2', 'http://10.0.0.1']) {
    await t.rejects(buildApp({ MCP_TRUST_PROXY: value }),
      { message: /^MCP_TRUST_PROXY: .* is not a hop count \(1\), true\/false, or a comma list of proxy addresses or CIDRs \(10\.0\.0\.1,10\.0\.0\.0\/8\)$/ },
      `${JSON.stringify(value)} is refused with a message that says what is expected`)
  }
})

t.test('MCP_TRUST_PROXY=true is still accepted, with a warning from the demo', async t => {
  const logs = captureLogs('warn')
  const app = await buildApp({ MCP_TRUST_PROXY: 'true' }, logs.options)
  t.teardown(() => app.close())
  await app.ready()
  const messages = logs.lines().filter(line => line.level === 40).map(line => String(line.msg))
  t.ok(messages.some(message => /^MCP_TRUST_PROXY=true trusts every X-Forwarded-For entry/.test(message)), 'the demo says what true does and what to set')

  const quiet = captureLogs('warn')
  const counted = await buildApp({ MCP_TRUST_PROXY: '1' }, quiet.options)
  t.teardown(() => counted.close())
  await counted.ready()
  t.same(quiet.lines().filter(line => line.level === 40), [], 'a hop count logs nothing')
})

const PLUGIN_WARNING = /^fastify-mcp-cancellation: trustProxy trusts every X-Forwarded-For hop/

/** The plugin's warn-level lines about trustProxy, for one registration under `trustProxy` with `options`. */
async function trustWarnings (t: Test, trustProxy: FastifyServerOptions['trustProxy'], options: McpCancellationOptions = {}, encapsulated = false): Promise<string[]> {
  const logs = captureLogs('warn')
  const app = Fastify({ ...logs.options, ...(trustProxy === undefined ? {} : { trustProxy }) })
  t.teardown(() => app.close())
  const plugin = { serverInfo: { name: 'trust-proxy', version: '1.0.0' }, ...options }
  if (encapsulated) await app.register(async child => { await child.register(mcpCancellation, plugin) }, { prefix: '/tenant' })
  else await app.register(mcpCancellation, plugin)
  await app.ready()
  return logs.lines().filter(line => line.level === 40 && PLUGIN_WARNING.test(String(line.msg))).map(line => String(line.msg))
}

t.test('the plugin warns once at registration when every hop is trusted and anonymous requests are allowed', async t => {
  const principal = (): string => 'alice'
  const warned = await trustWarnings(t, true)
  t.equal(warned.length, 1, 'trustProxy true, no auth: one warning')
  t.match(warned[0], /anonymous client chooses its own address scope/, 'it says what a client can do')
  t.match(warned[0], /proxies' addresses/, 'and what to set')
  t.equal((await trustWarnings(t, true, {}, true)).length, 1, 'registered in an encapsulated context: warned too')
  t.equal((await trustWarnings(t, () => true)).length, 1, 'a trust function that trusts everything: warned')
  t.equal((await trustWarnings(t, '0.0.0.0/1,128.0.0.0/1')).length, 1, 'every address as CIDRs: warned')
  t.equal((await trustWarnings(t, true, { auth: { principal, required: false } })).length, 1, 'auth that is not required: warned')

  t.same(await trustWarnings(t, undefined), [], 'no trustProxy: nothing')
  t.same(await trustWarnings(t, '10.0.0.1,10.0.0.2'), [], 'proxy addresses: nothing')
  t.same(await trustWarnings(t, (_address: string, hop: number) => hop < 1), [], 'a hop count: nothing (entries beyond it are not trusted)')
  t.same(await trustWarnings(t, true, { auth: { principal } }), [], 'auth required: nothing (no request is scoped by its address)')
})
