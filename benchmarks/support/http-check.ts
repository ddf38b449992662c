import { request } from 'node:http'
import { isDeepStrictEqual } from 'node:util'

export interface Exchange {
  method: 'POST'
  path: string
  headers: Record<string, string>
  body: string
}

/**
 * Sends one request on a fresh connection (`agent: false`, so no keep-alive socket outlives it) and
 * throws unless the answer is `status`, JSON, and deep-equal to `expected`. Returns the exact body text,
 * which autocannon's `expectBody` then compares against every measured response.
 */
export async function checkJson (origin: string, exchange: Exchange, expected: unknown, status = 200): Promise<string> {
  const response = await send(origin, exchange)
  const problems: string[] = []
  if (response.status !== status) problems.push(`status ${response.status}, expected ${status}`)
  if (!/^application\/json\b/.test(response.contentType ?? '')) problems.push(`content-type ${JSON.stringify(response.contentType)}, expected application/json`)
  let parsed: unknown
  try {
    parsed = JSON.parse(response.body)
  } catch {
    problems.push('body is not JSON')
  }
  if (problems.length === 0 && !isDeepStrictEqual(parsed, expected)) problems.push(`body differs from ${JSON.stringify(expected)}`)
  if (problems.length > 0) {
    throw new Error(`${origin}${exchange.path} answered wrongly: ${problems.join('; ')}\n  body: ${response.body.slice(0, 500)}`)
  }
  return response.body
}

async function send (origin: string, exchange: Exchange): Promise<{ status: number, contentType: string | undefined, body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(new URL(exchange.path, origin), { method: exchange.method, headers: exchange.headers, agent: false, timeout: 10_000 }, res => {
      const chunks: Buffer[] = []
      res.on('data', (chunk: Buffer) => chunks.push(chunk))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, contentType: res.headers['content-type'], body: Buffer.concat(chunks).toString('utf8') }))
      res.on('error', reject)
    })
    req.on('timeout', () => req.destroy(new Error('check request timed out')))
    req.on('error', reject)
    req.end(exchange.body)
  })
}
