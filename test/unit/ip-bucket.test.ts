/**
 * The address bucket of anonymous clients (DESIGN §4 Scope): IPv4 as is, IPv4-mapped IPv6 as its IPv4,
 * other IPv6 as its /64 with trailing zero groups folded into `::`, anything else `unknown`.
 * Adapted from ConduitMCP's client_bucket cases (reference/conduit-cancellation.md §4.3, §5 C1–C3, P58).
 */
import t from 'tap'
import { ipBucket } from '../../lib/identity/ip-bucket.js'
import { Scopes } from '../../lib/identity/scope.js'

const scopes = new Scopes()
const scopeOf = scopes.of.bind(scopes)

t.test('IPv4 addresses are their own bucket', async t => {
  t.equal(ipBucket('192.0.2.7'), '192.0.2.7')
  t.equal(ipBucket('203.0.113.9'), '203.0.113.9')
  t.equal(ipBucket('127.0.0.1'), '127.0.0.1')
  t.equal(ipBucket('0.0.0.0'), '0.0.0.0')
  t.equal(ipBucket('255.255.255.255'), '255.255.255.255')
  t.not(ipBucket('192.0.2.7'), ipBucket('192.0.2.8'), 'neighbouring IPv4 addresses are different scopes')
})

t.test('IPv4-mapped IPv6 is the IPv4 it carries', async t => {
  t.equal(ipBucket('::ffff:192.0.2.1'), '192.0.2.1')
  t.equal(ipBucket('::ffff:c000:201'), '192.0.2.1', 'hex form')
  t.equal(ipBucket('::FFFF:C000:0201'), '192.0.2.1', 'upper case, leading zero')
  t.equal(ipBucket('0:0:0:0:0:ffff:203.0.113.5'), '203.0.113.5', 'uncompressed form')
  t.equal(ipBucket('::ffff:255.255.255.255'), '255.255.255.255')
  t.equal(ipBucket('::ffff:0.0.0.0'), '0.0.0.0')
})

t.test('other IPv6 addresses are their /64', async t => {
  t.equal(ipBucket('2001:db8:1:2:3:4:5:6'), '2001:db8:1:2::/64')
  t.equal(ipBucket('2001:db8:1:2:a:b:c:d'), '2001:db8:1:2::/64', 'C3')
  t.equal(ipBucket('2001:db8:1:2:ffff:0:0:1'), '2001:db8:1:2::/64', 'same /64, same bucket (C3)')
  t.equal(ipBucket('2001:0DB8:0001:0002:0000:0000:0000:0001'), '2001:db8:1:2::/64', 'lower case, no leading zeros')
  t.not(ipBucket('2001:db8:1:2::1'), ipBucket('2001:db8:1:3::1'), 'another /64 is another bucket')
})

t.test('trailing zero groups of the prefix fold into ::', async t => {
  t.equal(ipBucket('2001:db8::'), '2001:db8::/64')
  t.equal(ipBucket('2001:db8::1'), '2001:db8::/64')
  t.equal(ipBucket('2001:db8:0:0:1::'), '2001:db8::/64')
  t.equal(ipBucket('2001:0:0:1::5'), '2001:0:0:1::/64', 'inner zero groups stay')
  t.equal(ipBucket('2001:db8:1::'), '2001:db8:1::/64')
  t.equal(ipBucket('::1'), '::/64')
  t.equal(ipBucket('::'), '::/64')
  t.equal(ipBucket('fe80::1'), 'fe80::/64')
})

t.test('a zone index is ignored', async t => {
  t.equal(ipBucket('fe80::1%eth0'), 'fe80::/64')
  t.equal(ipBucket('fe80::abcd:1%2'), 'fe80::/64')
})

t.test('NAT64 and IPv4-compatible forms are treated as IPv6', async t => {
  t.equal(ipBucket('64:ff9b::192.0.2.1'), '64:ff9b::/64')
  t.equal(ipBucket('::192.0.2.1'), '::/64')
})

t.test('unparseable addresses share the unknown bucket', async t => {
  for (const address of [undefined, '', 'localhost', '1.2.3', '256.1.1.1', '192.0.2.1:8080', '2001:db8::g', ':::1',
    '1:2:3:4:5:6:7:8:9', '[::1]', ' 192.0.2.1', '::ffff:999.1.1.1', '%eth0']) {
    t.equal(ipBucket(address), 'unknown', JSON.stringify(address) ?? 'undefined')
  }
})

t.test('scopes: session, then principal, then address (C1)', async t => {
  t.equal(scopeOf('sess-1', 'user-1', '203.0.113.9'), 'session:sess-1')
  t.equal(scopeOf(null, 'user-1', '203.0.113.9'), 'principal:user-1')
  t.equal(scopeOf(null, null, '203.0.113.9'), 'ip:203.0.113.9')
  t.equal(scopeOf(null, null, '2001:db8:1:2:a:b:c:d'), 'ip:2001:db8:1:2::/64')
  t.equal(scopeOf(null, null, undefined), 'ip:unknown')
  t.not(scopeOf(null, '203.0.113.9', '203.0.113.9'), scopeOf(null, null, '203.0.113.9'),
    'a principal named like an address is another scope (C14)')
})
