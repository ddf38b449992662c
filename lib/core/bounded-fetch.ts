/**
 * A JSON document fetched from a server the plugin does not control (an authorization server's
 * metadata, its key set, its introspection endpoint): with a time limit and a size limit, so a server
 * that hangs or answers 10 MB cannot hold a request or the process's memory hostage.
 */
import { FetchFailure } from './errors.js'

export interface FetchLimits {
  timeoutMs: number
  maxBytes: number
}

export interface FetchedJson {
  value: unknown
  headers: Headers
}

/** GETs (or POSTs `body`, form-encoded) `url` and parses the answer as JSON, within `limits`. */
export async function fetchJson (url: string, limits: FetchLimits, init: { body?: URLSearchParams, headers?: Record<string, string> } = {}): Promise<FetchedJson> {
  const signal = AbortSignal.timeout(limits.timeoutMs)
  let response: Response
  try {
    response = await fetch(url, {
      method: init.body === undefined ? 'GET' : 'POST',
      headers: { accept: 'application/json', ...init.headers },
      body: init.body,
      redirect: 'error',
      signal
    })
  } catch (error) {
    throw signal.aborted ? new FetchFailure('timeout', url, `no answer within ${limits.timeoutMs} ms`) : new FetchFailure('network', url, describe(error))
  }
  if (!response.ok) {
    await response.body?.cancel()
    throw new FetchFailure('status', url, `answered ${response.status}`)
  }
  const text = await readText(response, url, limits, signal)
  try {
    return { value: JSON.parse(text), headers: response.headers }
  } catch {
    throw new FetchFailure('not-json', url, 'answered something that is not JSON')
  }
}

async function readText (response: Response, url: string, limits: FetchLimits, signal: AbortSignal): Promise<string> {
  const declared = Number(response.headers.get('content-length') ?? 0)
  if (declared > limits.maxBytes) {
    await response.body?.cancel()
    throw new FetchFailure('too-large', url, `declared ${declared} bytes, more than ${limits.maxBytes}`)
  }
  const chunks: Uint8Array[] = []
  let size = 0
  try {
    for await (const chunk of response.body ?? []) {
      size += chunk.byteLength
      // Leaving the loop cancels the body: nothing more is read.
      if (size > limits.maxBytes) throw new FetchFailure('too-large', url, `more than ${limits.maxBytes} bytes`)
      chunks.push(chunk)
    }
  } catch (error) {
    if (error instanceof FetchFailure) throw error
    throw signal.aborted ? new FetchFailure('timeout', url, `no answer within ${limits.timeoutMs} ms`) : new FetchFailure('network', url, describe(error))
  }
  return Buffer.concat(chunks).toString('utf8')
}

function describe (error: unknown): string {
  const cause = (error as { cause?: { code?: unknown, message?: unknown } }).cause
  if (typeof cause?.code === 'string') return cause.code
  return error instanceof Error ? error.message : String(error)
}
