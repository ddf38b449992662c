import { isIP } from 'node:net'

/** How Fastify decides which X-Forwarded-For entries to believe (its `trustProxy` option). */
export type TrustProxy = boolean | string[] | ((address: string, hop: number) => boolean)

export interface TrustProxySetting {
  trustProxy: TrustProxy
  /** What the demo logs at startup about the setting, if anything. */
  warning: string | undefined
}

/** @fastify/proxy-addr's names for the private ranges (loopback, link-local, unique-local). */
const NAMED_RANGES = new Set(['loopback', 'linklocal', 'uniquelocal'])

function isAddressOrCidr (entry: string): boolean {
  if (NAMED_RANGES.has(entry)) return true
  const [address = '', prefix, extra] = entry.split('/')
  const family = isIP(address)
  if (family === 0 || extra !== undefined) return false
  // proxy-addr refuses a /0 (node_modules/@fastify/proxy-addr/index.js, parseipNotation).
  return prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) >= 1 && Number(prefix) <= (family === 4 ? 32 : 128))
}

/**
 * MCP_TRUST_PROXY: how many proxies stand in front of the server (`1`), or their addresses and CIDRs
 * (`10.0.0.1,10.0.0.0/8`). A number is not handed to Fastify: Fastify 5 treats a numeric `trustProxy` as
 * "trust nothing" (node_modules/fastify/docs/Reference/Server.md, trustProxy), so `request.ip` would be
 * the nearest proxy's and every client behind it would share one scope. The hop count is a trust
 * function instead: @fastify/proxy-addr asks it about the socket peer as hop 0, then each X-Forwarded-For
 * entry from the right, and `request.ip` is the first address it does not trust; trusting hops below n
 * makes it the n-th entry from the right, the address the outermost proxy saw. `true` trusts every
 * entry, the leftmost of which the client writes itself: still accepted, with a warning.
 */
export function trustProxySetting (value: string | undefined): TrustProxySetting {
  if (value === undefined || value === '' || value === 'false') return { trustProxy: false, warning: undefined }
  if (value === 'true') {
    return {
      trustProxy: true,
      warning: 'MCP_TRUST_PROXY=true trusts every X-Forwarded-For entry, and the leftmost one is written by the client: ' +
        'an anonymous client picks its own address scope. Set the number of proxies in front of the server (MCP_TRUST_PROXY=1) or their addresses (MCP_TRUST_PROXY=10.0.0.1,10.0.0.2)'
    }
  }
  if (/^\d+$/.test(value)) {
    const hops = Number(value)
    return { trustProxy: hops === 0 ? false : (_address, hop) => hop < hops, warning: undefined }
  }
  const entries = value.split(',').map(entry => entry.trim())
  if (!entries.every(isAddressOrCidr)) {
    throw new Error(`MCP_TRUST_PROXY: ${JSON.stringify(value)} is not a hop count (1), true/false, or a comma list of proxy addresses or CIDRs (10.0.0.1,10.0.0.0/8)`)
  }
  return { trustProxy: entries, warning: undefined }
}
