import type { BenchConfig } from './config.js'
import { checkJson, type Exchange } from './http-check.js'
import { measure, type Round } from './load.js'
import { waitForQuiet } from './noise.js'
import { startServer } from './server-process.js'

/** A request sent in every measured round of a scenario, and the answer (parsed) the up-front check expects. */
export interface EchoCall {
  request: Exchange
  expected: unknown
}

const ECHO_ARGUMENTS = { name: 'echo', arguments: { text: 'hello' } }
const BASE_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }

/** A legacy (2025-11-25) `tools/call` of `echo`: what every throughput comparison sends unless a scenario says otherwise. */
export const LEGACY_ECHO: EchoCall = {
  request: {
    method: 'POST',
    path: '/mcp',
    headers: { ...BASE_HEADERS, 'mcp-protocol-version': '2025-11-25' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: ECHO_ARGUMENTS })
  },
  expected: { jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: 'hello' }] } }
}

/**
 * The same call in the 2026-07-28 era: the version and the (empty) client capabilities in the request's
 * `_meta`, the routing headers; the result says it is complete and names the server (the plugin
 * servers' `serverInfo`, see servers/plugin-app.ts).
 */
export const MODERN_ECHO: EchoCall = {
  request: {
    method: 'POST',
    path: '/mcp',
    headers: { ...BASE_HEADERS, 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 'echo' },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: {
        ...ECHO_ARGUMENTS,
        _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} }
      }
    })
  },
  expected: {
    jsonrpc: '2.0',
    id: 1,
    result: {
      content: [{ type: 'text', text: 'hello' }],
      resultType: 'complete',
      _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'bench', version: '1.0.0' } }
    }
  }
}

/** What is measured: a name to report, the server that answers, and the call it is sent. */
export interface EchoScenario {
  name: string
  /** `benchmarks/servers/<server>.ts`; the scenario's name when not given. */
  server?: string
  /** `LEGACY_ECHO` when not given. */
  call?: EchoCall
}

/** A server answering echo calls, checked once, that can be measured in as many rounds as wanted. */
export interface EchoServer {
  readonly name: string
  /** The body of the checked answer, exactly as sent: what every measured response must be. */
  readonly body: string
  /** A warm-up round (`config.warmup` s, discarded), then a measured round (`config.duration` s). */
  measure: (config: BenchConfig) => Promise<Round>
  stop: () => Promise<void>
}

/**
 * Starts the scenario's server (a bare name: `benchmarks/servers/<name>.ts` sent `LEGACY_ECHO`) and
 * checks its answer to the scenario's call (and whatever `check` adds); every measured response must
 * then be byte-identical to that answer.
 */
export async function startEchoServer (scenario: string | EchoScenario, config: BenchConfig, check?: (origin: string) => Promise<void>): Promise<EchoServer> {
  const { name, server: script = name, call = LEGACY_ECHO } = typeof scenario === 'string' ? { name: scenario } : scenario
  const server = await startServer(script, config.nodeArgs)
  try {
    const expectBody = await checkJson(server.origin, call.request, call.expected)
    await check?.(server.origin)
    console.log(`${name}: servers/${script}.ts, pid ${server.pid}, response checked (${expectBody.length} bytes)`)
    return {
      name,
      body: expectBody,
      measure: async roundConfig => await measure(server.origin, server.pid, call.request, roundConfig, expectBody),
      stop: server.stop
    }
  } catch (error) {
    await server.stop()
    throw error
  }
}

/**
 * One measured round of echo calls against a fresh server for `scenario` (as in `startEchoServer`):
 * waits for a quiet machine when asked, checks the answer, measures, stops the server.
 */
export async function echoRound (scenario: string | EchoScenario, config: BenchConfig, check?: (origin: string) => Promise<void>): Promise<Round> {
  const name = typeof scenario === 'string' ? scenario : scenario.name
  if (config.quiet > 0 && !await waitForQuiet(config.quiet * 1000)) console.error(`${name}: the machine did not go quiet within ${config.quiet} s; measuring anyway`)
  const server = await startEchoServer(scenario, config, check)
  try {
    console.log(`${name}: warm-up ${config.warmup} s, measuring ${config.duration} s…`)
    return await server.measure(config)
  } finally {
    await server.stop()
  }
}
