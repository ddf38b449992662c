import { isIPv4, isIPv6 } from 'node:net'

/**
 * The cancellation scope of an anonymous client: an IPv4 address as is, an IPv4-mapped
 * IPv6 address as its IPv4, any other IPv6 address as its /64 (a host is routinely handed a whole /64
 * and could otherwise rotate addresses to multiply its quota), and `unknown` for anything unparseable.
 */
export function ipBucket (address: string | undefined): string {
  if (address === undefined) return 'unknown'
  if (isIPv4(address)) return address
  const zoneless = address.split('%', 1)[0]!
  if (!isIPv6(zoneless)) return 'unknown'
  const groups = ipv6Groups(zoneless)
  if (groups.slice(0, 5).every(g => g === 0) && groups[5] === 0xffff) {
    const [hi, lo] = [groups[6]!, groups[7]!]
    return `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`
  }
  const prefix = groups.slice(0, 4)
  while (prefix.length > 0 && prefix[prefix.length - 1] === 0) prefix.pop()
  return `${prefix.map(g => g.toString(16)).join(':')}::/64`
}

/** The eight 16-bit groups of a valid IPv6 address: a trailing dotted IPv4 becomes two groups, `::` is expanded. */
function ipv6Groups (address: string): number[] {
  const lastColon = address.lastIndexOf(':')
  const dotted = address.slice(lastColon + 1)
  const text = dotted.includes('.')
    ? address.slice(0, lastColon + 1) + dottedToGroups(dotted)
    : address
  const [head = '', tail] = text.split('::')
  const parse = (part: string | undefined): number[] => part === undefined || part === '' ? [] : part.split(':').map(h => parseInt(h, 16))
  const left = parse(head)
  const right = parse(tail)
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right]
}

function dottedToGroups (ipv4: string): string {
  const [a, b, c, d] = ipv4.split('.').map(Number) as [number, number, number, number]
  return `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
}
