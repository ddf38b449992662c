/**
 * The cache of verified access tokens (lib/identity/verified-tokens.ts): a token verified once is not
 * verified again until its exp (at most maxAgeMs), refusals and tokens without exp are never kept, and
 * the cache holds at most maxEntries.
 */
import t from 'tap'
import type { FastifyRequest } from 'fastify'
import { AuthFailure } from '../../lib/core/errors.js'
import type { McpPrincipal, TokenVerifier } from '../../lib/identity/principal.js'
import { VerifiedTokens } from '../../lib/identity/verified-tokens.js'

const request = {} as unknown as FastifyRequest

/** A verifier that accepts `good-*` tokens (exp from the token's suffix in seconds from now, `none` for no exp) and counts its calls. */
function countingVerifier (): TokenVerifier & { calls: number } {
  const verifier = {
    calls: 0,
    async verify (token: string): Promise<McpPrincipal> {
      verifier.calls++
      if (!token.startsWith('good-')) throw new AuthFailure('invalid', 'refused')
      const [, seconds] = token.split('-')
      const claims: Record<string, unknown> = seconds === 'none' ? {} : { exp: Math.floor(Date.now() / 1000) + Number(seconds) }
      return { id: token, subject: token, issuer: null, scopes: [], clientId: null, claims }
    }
  }
  return verifier
}

t.test('a verified token is verified once until its exp; refusals and tokens without exp every time', async t => {
  const inner = countingVerifier()
  const cache = new VerifiedTokens(inner, { maxEntries: 10, maxAgeMs: 60_000 })
  for (let i = 0; i < 5; i++) t.equal((await cache.verify('good-600', request)).id, 'good-600')
  t.equal(inner.calls, 1, 'five requests, one verification')
  for (let i = 0; i < 3; i++) await t.rejects(Promise.resolve(cache.verify('bad', request)), AuthFailure)
  t.equal(inner.calls, 4, 'a refused token is verified each time')
  for (let i = 0; i < 3; i++) await cache.verify('good-none', request)
  t.equal(inner.calls, 7, 'a token without exp is verified each time')
  await cache.verify('good-0', request)
  await cache.verify('good-0', request)
  t.equal(inner.calls, 9, 'a token expiring now is not kept past its exp')
})

t.test('maxAgeMs bounds how long a token is trusted without a check; 0 checks every request', async t => {
  const inner = countingVerifier()
  const cache = new VerifiedTokens(inner, { maxEntries: 10, maxAgeMs: 50 })
  await cache.verify('good-600', request)
  await cache.verify('good-600', request)
  t.equal(inner.calls, 1)
  await new Promise(resolve => setTimeout(resolve, 80))
  await cache.verify('good-600', request)
  t.equal(inner.calls, 2, 'verified again after maxAgeMs')
  const never = countingVerifier()
  const off = new VerifiedTokens(never, { maxEntries: 10, maxAgeMs: 0 })
  await off.verify('good-600', request)
  await off.verify('good-600', request)
  t.equal(never.calls, 2)
})

t.test('at most maxEntries are kept, the oldest dropped first', async t => {
  const inner = countingVerifier()
  const cache = new VerifiedTokens(inner, { maxEntries: 2, maxAgeMs: 60_000 })
  await cache.verify('good-601', request)
  await cache.verify('good-602', request)
  await cache.verify('good-603', request)
  t.equal(inner.calls, 3)
  await cache.verify('good-603', request)
  await cache.verify('good-602', request)
  t.equal(inner.calls, 3, 'the two newest are kept')
  await cache.verify('good-601', request)
  t.equal(inner.calls, 4, 'the oldest was dropped')
})
