/**
 * fetchJson (lib/core/bounded-fetch.ts) against a server of the test's own: every way an answer can
 * fail is a `FetchFailure` whose `reason` says which (what the outage log and the 503 of a token that
 * cannot be verified rest on): no answer or an answer that stalls mid-body within the time limit is
 * `timeout`; a refused or cut connection, and a redirect (never followed), `network`; a non-2xx
 * `status`; a body declared or sent larger than the limit `too-large`, without waiting for the rest;
 * an answer without a body, or one that is not JSON, `not-json`.
 */
import t from 'tap'
import { fetchJson, type FetchLimits } from '../../lib/core/bounded-fetch.js'
import type { FetchFailureReason } from '../../lib/core/errors.js'
import { freePort } from '../helpers/redis-server.js'
import { json, scriptedServer } from '../helpers/scripted-server.js'

/** Short enough for a test to wait for, long enough for a loopback answer. */
const LIMITS: FetchLimits = { timeoutMs: 1500, maxBytes: 1024 }

/** What a `FetchFailure` of `url` for `reason` matches: its detail too when given. */
function failure (reason: FetchFailureReason, url: string, detail?: string): { name: string, reason: FetchFailureReason, url: string, message?: string } {
  return { name: 'FetchFailure', reason, url, ...(detail === undefined ? {} : { message: `${url}: ${detail}` }) }
}

t.test('a JSON answer is parsed, with its headers; a POST sends its form and headers', async t => {
  const server = await scriptedServer(t, {
    '/doc': json({ issuer: 'x' }, { 'cache-control': 'max-age=60' }),
    '/introspect': json({ active: false })
  })
  const { value, headers } = await fetchJson(`${server.origin}/doc`, LIMITS)
  t.same(value, { issuer: 'x' })
  t.equal(headers.get('cache-control'), 'max-age=60')

  const posted = await fetchJson(`${server.origin}/introspect`, LIMITS, { body: new URLSearchParams({ token: 'abc' }), headers: { authorization: 'Basic eA==' } })
  t.same(posted.value, { active: false })
  const request = server.lastRequest('/introspect')
  t.equal(request?.body, 'token=abc')
  t.equal(request?.headers.authorization, 'Basic eA==')
  t.equal(request?.headers.accept, 'application/json')
})

t.test('an answer without a body (204) is not-json', async t => {
  const server = await scriptedServer(t, { '/empty': (_request, response) => { response.writeHead(204).end() } })
  const url = `${server.origin}/empty`
  await t.rejects(fetchJson(url, LIMITS), failure('not-json', url))
})

t.test('a non-2xx answer is status, naming the status', async t => {
  const server = await scriptedServer(t, { '/down': (_request, response) => { response.writeHead(503, { 'content-type': 'application/json' }).end('{}') } })
  const url = `${server.origin}/down`
  await t.rejects(fetchJson(url, LIMITS), failure('status', url, 'answered 503'))
})

t.test('a redirect is not followed: network', async t => {
  const server = await scriptedServer(t, {
    '/moved': (_request, response) => { response.writeHead(302, { location: '/elsewhere' }).end() },
    '/elsewhere': json({ issuer: 'x' })
  })
  const url = `${server.origin}/moved`
  await t.rejects(fetchJson(url, LIMITS), failure('network', url))
  t.equal(server.hits('/elsewhere'), 0, 'the target of the redirect was never asked')
})

t.test('a refused connection is network, naming the error code', async t => {
  const url = `http://127.0.0.1:${await freePort()}/doc`
  await t.rejects(fetchJson(url, LIMITS), failure('network', url, 'ECONNREFUSED'))
})

t.test('no answer within the time limit is timeout', async t => {
  const server = await scriptedServer(t, { '/hang': () => {} })
  const url = `${server.origin}/hang`
  await t.rejects(fetchJson(url, { ...LIMITS, timeoutMs: 300 }), failure('timeout', url, 'no answer within 300 ms'))
})

t.test('an answer that stalls mid-body is timeout, not a body cut short', async t => {
  const server = await scriptedServer(t, {
    '/stall': (_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' })
      response.write('{"keys":[')
    }
  })
  const url = `${server.origin}/stall`
  await t.rejects(fetchJson(url, { ...LIMITS, timeoutMs: 300 }), failure('timeout', url, 'no answer within 300 ms'))
})

t.test('a connection cut mid-body is network, naming the socket error', async t => {
  const server = await scriptedServer(t, {
    '/cut': (request, response) => {
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' })
      response.write('{"keys":[', () => { setTimeout(() => { request.socket.destroy() }, 20) })
    }
  })
  const url = `${server.origin}/cut`
  await t.rejects(fetchJson(url, LIMITS), failure('network', url, 'UND_ERR_SOCKET'))
})

t.test('a body declared larger than maxBytes is too-large at once, nothing of it read', async t => {
  // The body never comes: waiting for it would end in a timeout instead.
  const server = await scriptedServer(t, {
    '/huge': (_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': '1025' })
      response.flushHeaders()
    }
  })
  const url = `${server.origin}/huge`
  await t.rejects(fetchJson(url, LIMITS), failure('too-large', url, 'declared 1025 bytes, more than 1024'))
})

t.test('a body sent larger than maxBytes without a length is too-large once the limit is passed, the rest not waited for', async t => {
  const server = await scriptedServer(t, {
    '/endless': (_request, response) => {
      // Chunked, never ended: only stopping at the limit ends the fetch before the time limit.
      response.writeHead(200, { 'content-type': 'application/json' })
      response.write(`["${'x'.repeat(600)}`)
      setTimeout(() => { response.write('x'.repeat(600)) }, 20)
    }
  })
  const url = `${server.origin}/endless`
  await t.rejects(fetchJson(url, LIMITS), failure('too-large', url, 'more than 1024 bytes'))
})

t.test('an answer that is not JSON is not-json', async t => {
  const server = await scriptedServer(t, { '/html': (_request, response) => { response.writeHead(200, { 'content-type': 'text/html' }).end('<html></html>') } })
  const url = `${server.origin}/html`
  await t.rejects(fetchJson(url, LIMITS), failure('not-json', url))
})
