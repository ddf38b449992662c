import type { BenchConfig } from './config.js'
import { checkJson, type Exchange } from './http-check.js'
import { measure, type Round } from './load.js'
import { waitForQuiet } from './noise.js'
import { startServer } from './server-process.js'

/** The request every throughput comparison sends: a legacy `tools/call` of `echo`. */
export const ECHO_EXCHANGE: Exchange = {
  method: 'POST',
  path: '/mcp',
  headers: {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': '2025-11-25'
  },
  body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: { text: 'hello' } } })
}

export const ECHO_EXPECTED = { jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: 'hello' }] } }

/** A server answering echo calls, checked once, that can be measured in as many rounds as wanted. */
export interface EchoServer {
  readonly name: string
  /** A warm-up round (`config.warmup` s, discarded), then a measured round (`config.duration` s). */
  measure: (config: BenchConfig) => Promise<Round>
  stop: () => Promise<void>
}

/**
 * Starts `benchmarks/servers/<name>.ts` and checks its echo answer (and whatever `check` adds); every
 * measured response must then be byte-identical to that answer.
 */
export async function startEchoServer (name: string, config: BenchConfig, check?: (origin: string) => Promise<void>): Promise<EchoServer> {
  const server = await startServer(name, config.nodeArgs)
  try {
    const expectBody = await checkJson(server.origin, ECHO_EXCHANGE, ECHO_EXPECTED)
    await check?.(server.origin)
    console.log(`${name}: pid ${server.pid}, response checked (${expectBody.length} bytes)`)
    return {
      name,
      measure: async roundConfig => await measure(server.origin, server.pid, ECHO_EXCHANGE, roundConfig, expectBody),
      stop: server.stop
    }
  } catch (error) {
    await server.stop()
    throw error
  }
}

/**
 * One measured round of echo calls against a fresh server `benchmarks/servers/<name>.ts`: waits for a
 * quiet machine when asked, checks the answer, measures, stops the server.
 */
export async function echoRound (name: string, config: BenchConfig, check?: (origin: string) => Promise<void>): Promise<Round> {
  if (config.quiet > 0 && !await waitForQuiet(config.quiet * 1000)) console.error(`${name}: the machine did not go quiet within ${config.quiet} s; measuring anyway`)
  const server = await startEchoServer(name, config, check)
  try {
    console.log(`${name}: warm-up ${config.warmup} s, measuring ${config.duration} s…`)
    return await server.measure(config)
  } finally {
    await server.stop()
  }
}
