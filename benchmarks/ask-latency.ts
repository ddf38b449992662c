/**
 * Latency of asking the client (`ctx.elicit`), in both eras, against one plugin server
 * (servers/plugin-ask.ts: default options, a `secret`, `echo` and `ask`) in a process of its own; this
 * process is the client (node:http, one keep-alive connection per kind of request, loopback).
 * Wall-clock on the client, from just before a request is written:
 *
 * - `mrtr` (2026-07-28): `tools/call ask` → `input_required` (JSON) → the same call again with a new id,
 *   `inputResponses` under the key the server chose and its `requestState` → the final result;
 * - `legacy-ask` (2025-11-25): `tools/call ask` → its SSE stream carries `elicitation/create` → the
 *   answer is POSTed (202, on a second connection) → the tool's result arrives on the first stream;
 * - baselines on the same server: one `tools/call echo` in each era (`echo-modern`, `echo-legacy`).
 *
 * The four are interleaved request by request (their order rotating), so a slow spell of the shared
 * machine hits them alike; each is checked on every iteration (status, content type, exact messages).
 * Reported: min/p50/p90/p99/max/mean of each, the phases of the two asks, and each ask ÷ its era's echo
 * by p50, p99 and mean, overall and per block of the run. No goal is set: figures only.
 *
 * `npm run bench -- ask-latency`. BENCH_ASKS overrides 2000 iterations (after 200 of warm-up).
 */
import http from 'node:http'
import { isDeepStrictEqual } from 'node:util'
import type { Benchmark } from './support/benchmark.js'
import { ASK_ELICITATION, askText } from './support/ask-fixture.js'
import { describeLoad, envCount, printLatencyEnvironment, summarize, summaryCells, SUMMARY_HEADER, watchLoad, withTimeout, type LatencySummary } from './support/latency.js'
import { waitForQuiet } from './support/noise.js'
import { fmt, printTable } from './support/report.js'
import { startServer } from './support/server-process.js'

const WARM_UP = 200
/** Blocks the measured iterations are split into for the per-block ratios. */
const BLOCKS = 5
const TIMEOUT_MS = 5000
const MODERN = '2026-07-28'
const BASE_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }
const LEGACY_HEADERS = { ...BASE_HEADERS, 'mcp-protocol-version': '2025-11-25' }
const modernHeaders = (tool: string): Record<string, string> => ({ ...BASE_HEADERS, 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': tool })
/** The request `_meta` of 2026-07-28; the client declares elicitation (form mode), which `ask` needs. */
const MODERN_META = { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': { elicitation: {} } }
const SERVER_META = { 'io.modelcontextprotocol/serverInfo': { name: 'bench', version: '1.0.0' } }
const ANSWER_NAME = 'Ada'
const ANSWER = { action: 'accept', content: { name: ANSWER_NAME } }

const SCENARIOS = ['echo-legacy', 'legacy-ask', 'echo-modern', 'mrtr'] as const
type Scenario = typeof SCENARIOS[number]

/** One iteration's figures, in ms: `total` and, for the asks, its phases. */
type Sample = Record<string, number> & { total: number }

interface Answer { status: number, contentType: string, body: string }

/** Keep-alive connections: one per kind of request, so none waits for another's socket. */
class Connections {
  readonly #agents = new Map<string, http.Agent>()
  get (name: string): http.Agent {
    let agent = this.#agents.get(name)
    if (agent === undefined) this.#agents.set(name, agent = new http.Agent({ keepAlive: true, maxSockets: 1 }))
    return agent
  }

  destroy (): void {
    for (const agent of this.#agents.values()) agent.destroy()
  }
}

function post (url: URL, agent: http.Agent, headers: Record<string, string>, body: unknown): Promise<Answer> {
  const payload = JSON.stringify(body)
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method: 'POST', agent, headers: { ...headers, 'content-length': String(Buffer.byteLength(payload)) } }, response => {
      const chunks: Buffer[] = []
      response.on('data', (chunk: Buffer) => chunks.push(chunk))
      response.on('end', () => { resolve({ status: response.statusCode ?? 0, contentType: response.headers['content-type'] ?? '', body: Buffer.concat(chunks).toString('utf8') }) })
      response.on('error', reject)
    })
    request.on('error', reject)
    request.end(payload)
  })
}

/** The JSON-RPC message of a 200 JSON answer; throws with the details otherwise. */
function jsonOf (answer: Answer, what: string): any {
  if (answer.status !== 200 || !answer.contentType.startsWith('application/json')) {
    throw new Error(`${what}: status ${answer.status}, content-type ${JSON.stringify(answer.contentType)}: ${answer.body.slice(0, 300)}`)
  }
  return JSON.parse(answer.body)
}

function expectEqual (actual: unknown, expected: unknown, what: string): void {
  if (!isDeepStrictEqual(actual, expected)) throw new Error(`${what}: got ${JSON.stringify(actual)}, expected ${JSON.stringify(expected)}`)
}

const text = (value: string): Array<{ type: string, text: string }> => [{ type: 'text', text: value }]

class Client {
  readonly #url: URL
  readonly #connections = new Connections()

  constructor (url: URL) {
    this.#url = url
  }

  async echoLegacy (id: number): Promise<Sample> {
    const started = performance.now()
    const answer = await post(this.#url, this.#connections.get('echo-legacy'), LEGACY_HEADERS,
      { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: { text: `e${id}` } } })
    const total = performance.now() - started
    expectEqual(jsonOf(answer, 'echo (legacy)'), { jsonrpc: '2.0', id, result: { content: text(`e${id}`) } }, 'echo (legacy)')
    return { total }
  }

  async echoModern (id: number): Promise<Sample> {
    const started = performance.now()
    const answer = await post(this.#url, this.#connections.get('echo-modern'), modernHeaders('echo'),
      { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: { text: `e${id}` }, _meta: MODERN_META } })
    const total = performance.now() - started
    expectEqual(jsonOf(answer, 'echo (2026-07-28)'), { jsonrpc: '2.0', id, result: { content: text(`e${id}`), resultType: 'complete', _meta: SERVER_META } }, 'echo (2026-07-28)')
    return { total }
  }

  /** One complete MRTR round trip: input_required, then the retry with the answer (both on one connection). */
  async mrtr (id: number): Promise<Sample> {
    const agent = this.#connections.get('mrtr')
    const headers = modernHeaders('ask')
    const call = { name: 'ask', arguments: { text: `m${id}` } }
    const started = performance.now()
    const first = await post(this.#url, agent, headers, { jsonrpc: '2.0', id: `${id}a`, method: 'tools/call', params: { ...call, _meta: MODERN_META } })
    const inputRequired = performance.now()
    // Parsed and checked between the two POSTs, as a client must: the key and the state come from it.
    const round = jsonOf(first, 'ask, first round (2026-07-28)')
    const keys = Object.keys(round?.result?.inputRequests ?? {})
    if (round.id !== `${id}a` || round.result.resultType !== 'input_required' || keys.length !== 1 || typeof round.result.requestState !== 'string') {
      throw new Error(`ask, first round (2026-07-28): expected input_required with one input request, got ${first.body.slice(0, 300)}`)
    }
    const key = keys[0]!
    expectEqual(round.result.inputRequests[key], { method: 'elicitation/create', params: ASK_ELICITATION }, `ask, first round: inputRequests.${key}`)
    const retried = performance.now()
    const second = await post(this.#url, agent, headers, {
      jsonrpc: '2.0',
      id: `${id}b`,
      method: 'tools/call',
      params: { ...call, inputResponses: { [key]: ANSWER }, requestState: round.result.requestState, _meta: MODERN_META }
    })
    const ended = performance.now()
    expectEqual(jsonOf(second, 'ask, retry (2026-07-28)'),
      { jsonrpc: '2.0', id: `${id}b`, result: { content: text(askText(`m${id}`, ANSWER_NAME)), resultType: 'complete', _meta: SERVER_META } }, 'ask, retry (2026-07-28)')
    return { total: ended - started, first: inputRequired - started, client: retried - inputRequired, second: ended - retried }
  }

  /**
   * One legacy ask: the call's SSE stream brings `elicitation/create`, whose answer is POSTed at once on
   * another connection; the tool's result then arrives on the stream, which ends. `total` is until the
   * result event has been read; the iteration also waits for the stream's end and the answer's 202.
   */
  async legacyAsk (id: number): Promise<Sample> {
    const streamAgent = this.#connections.get('legacy-ask')
    const answerAgent = this.#connections.get('legacy-answer')
    const payload = JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'ask', arguments: { text: `l${id}` } } })
    const t: Record<string, number> = {}
    let answered: Promise<Answer> | undefined
    const started = performance.now()
    await new Promise<void>((resolve, reject) => {
      const request = http.request(this.#url, { method: 'POST', agent: streamAgent, headers: { ...LEGACY_HEADERS, 'content-length': String(Buffer.byteLength(payload)) } }, response => {
        const type = response.headers['content-type'] ?? ''
        if (response.statusCode !== 200 || !type.startsWith('text/event-stream')) {
          response.resume()
          reject(new Error(`ask (legacy): status ${response.statusCode ?? 0}, content-type ${JSON.stringify(type)}, expected a 200 SSE stream`))
          return
        }
        response.setEncoding('utf8')
        let buffer = ''
        const read = (chunk: string): void => {
          buffer += chunk
          let end: number
          while ((end = buffer.indexOf('\n\n')) !== -1) {
            const frame = buffer.slice(0, end)
            buffer = buffer.slice(end + 2)
            const data = frame.split('\n').filter(line => line.startsWith('data:')).map(line => line.slice(5).replace(/^ /, '')).join('\n')
            if (data === '') continue // a comment or a priming event
            const message = JSON.parse(data)
            if (message.method === 'elicitation/create' && t.asked === undefined) {
              t.asked = performance.now()
              if (typeof message.id !== 'string') throw new Error(`ask (legacy): elicitation/create with a non-string id ${JSON.stringify(message.id)}`)
              expectEqual(message.params, ASK_ELICITATION, 'ask (legacy): elicitation/create params')
              t.answering = performance.now()
              answered = post(this.#url, answerAgent, LEGACY_HEADERS, { jsonrpc: '2.0', id: message.id, result: ANSWER })
                .then(answer => { t.accepted = performance.now(); return answer })
              answered.catch(() => {}) // awaited below unless the stream fails first
            } else if (message.id === id && t.result === undefined) {
              t.result = performance.now()
              expectEqual(message, { jsonrpc: '2.0', id, result: { content: text(askText(`l${id}`, ANSWER_NAME)) } }, 'ask (legacy): result')
            } else {
              throw new Error(`ask (legacy): unexpected message on the stream: ${data.slice(0, 300)}`)
            }
          }
        }
        // A message that fails its check ends the iteration (and the run) with the error.
        response.on('data', (chunk: string) => {
          try {
            read(chunk)
          } catch (error) {
            request.destroy()
            reject(error)
          }
        })
        response.on('end', () => {
          t.ended = performance.now()
          if (t.result === undefined) reject(new Error(`ask (legacy): the stream ended without the result (asked: ${t.asked !== undefined})`))
          else resolve()
        })
        response.on('error', reject)
      })
      request.on('error', reject)
      request.end(payload)
    })
    const accepted = await answered!
    if (accepted.status !== 202) throw new Error(`ask (legacy): the answer POST got ${accepted.status}, expected 202: ${accepted.body.slice(0, 300)}`)
    return {
      total: t.result! - started,
      first: t.asked! - started,
      client: t.answering! - t.asked!,
      second: t.result! - t.answering!,
      accepted: t.accepted! - t.answering!,
      streamEnd: t.ended! - started
    }
  }

  run (scenario: Scenario, id: number): Promise<Sample> {
    switch (scenario) {
      case 'echo-legacy': return this.echoLegacy(id)
      case 'legacy-ask': return this.legacyAsk(id)
      case 'echo-modern': return this.echoModern(id)
      case 'mrtr': return this.mrtr(id)
    }
  }

  close (): void {
    this.#connections.destroy()
  }
}

/** `subject ÷ against` of a summary statistic. */
const ratioOf = (subject: LatencySummary, against: LatencySummary, key: 'p50' | 'p99' | 'mean'): number => subject[key] / against[key]

const askLatency: Benchmark = {
  description: 'asking the client (ctx.elicit): one MRTR round trip (2026-07-28) and one legacy SSE ask/answer, against tools/call echo in each era',
  async run (config, args) {
    if (args.length > 0) throw new Error(`ask-latency takes no arguments, got ${args.join(' ')}`)
    const iterations = envCount('BENCH_ASKS', 2000)
    printLatencyEnvironment()
    // servers/plugin-app.ts honours BENCH_PLUGIN_ENTRY (the line above names lib/ regardless).
    const entry = process.env.BENCH_PLUGIN_ENTRY
    if (entry !== undefined && entry !== '') console.log(`the server's plugin: BENCH_PLUGIN_ENTRY=${entry}, not lib/`)
    const server = await startServer('plugin-ask', config.nodeArgs)
    const url = new URL('/mcp', server.origin)
    const client = new Client(url)
    try {
      console.log(`server: servers/plugin-ask.ts, pid ${server.pid}, ${url.href}; client: node:http in this process (pid ${process.pid}), keep-alive`)
      let id = 0
      // Warm-up, and the first check of every scenario (a failure stops the run here).
      for (let i = 0; i < WARM_UP; i++) for (const scenario of SCENARIOS) await withTimeout(client.run(scenario, ++id), TIMEOUT_MS, scenario)
      if (config.quiet > 0 && !await waitForQuiet(config.quiet * 1000)) console.error(`the machine did not go quiet within ${config.quiet} s; measuring anyway`)
      const samples = new Map<Scenario, Sample[]>(SCENARIOS.map(s => [s, []]))
      const load = watchLoad([server.pid])
      const measuredAt = performance.now()
      for (let i = 0; i < iterations; i++) {
        // The order rotates, so none is always first after another.
        for (let k = 0; k < SCENARIOS.length; k++) {
          const scenario = SCENARIOS[(i + k) % SCENARIOS.length]!
          samples.get(scenario)!.push(await withTimeout(client.run(scenario, ++id), TIMEOUT_MS, scenario))
        }
      }
      const seconds = (performance.now() - measuredAt) / 1000
      const loadReport = load.stop()

      const of = (scenario: Scenario, phase = 'total', from = 0, to = iterations): LatencySummary =>
        summarize(samples.get(scenario)!.slice(from, to).map(s => s[phase]!))
      console.log(`\n## ask latency: ${iterations} iterations of each, interleaved, sequential, loopback, keep-alive (${seconds.toFixed(1)} s)\n`)
      printTable(['interval', ...SUMMARY_HEADER], [
        ['mrtr (2026-07-28): first POST → input_required → retry POST → final result', ...summaryCells(of('mrtr'))],
        ['  of which: first POST → input_required (JSON)', ...summaryCells(of('mrtr', 'first'))],
        ['  of which: client (parse, check) between the two', ...summaryCells(of('mrtr', 'client'))],
        ['  of which: retry POST → final result', ...summaryCells(of('mrtr', 'second'))],
        ['echo-modern (2026-07-28): tools/call echo → result', ...summaryCells(of('echo-modern'))],
        ['legacy-ask (2025-11-25): POST → elicitation/create on SSE → answer POST → result on SSE', ...summaryCells(of('legacy-ask'))],
        ['  of which: POST → elicitation/create on the stream', ...summaryCells(of('legacy-ask', 'first'))],
        ['  of which: client (parse, check) before the answer', ...summaryCells(of('legacy-ask', 'client'))],
        ['  of which: answer POST → result on the stream', ...summaryCells(of('legacy-ask', 'second'))],
        ['  (answer POST → its 202)', ...summaryCells(of('legacy-ask', 'accepted'))],
        ['  (POST → stream end)', ...summaryCells(of('legacy-ask', 'streamEnd'))],
        ['echo-legacy (2025-11-25): tools/call echo → result', ...summaryCells(of('echo-legacy'))]
      ])

      const comparisons: Array<[string, Scenario, Scenario]> = [
        ['mrtr ÷ echo-modern', 'mrtr', 'echo-modern'],
        ['legacy-ask ÷ echo-legacy', 'legacy-ask', 'echo-legacy'],
        ['mrtr ÷ legacy-ask', 'mrtr', 'legacy-ask'],
        ['echo-modern ÷ echo-legacy', 'echo-modern', 'echo-legacy']
      ]
      const size = Math.floor(iterations / BLOCKS)
      const blocks = size > 0 ? Array.from({ length: BLOCKS }, (_, b) => [b * size, b === BLOCKS - 1 ? iterations : (b + 1) * size] as const) : []
      console.log(`\nRatios of the latencies (no goal; the same server, interleaved)${blocks.length > 0 ? `; p50 per block of ~${size} iterations in parentheses` : ''}:\n`)
      printTable(['ratio', 'p50', 'p99', 'mean', ...(blocks.length > 0 ? ['p50 per block'] : [])], comparisons.map(([label, subject, against]) => [
        label,
        fmt.ratio(ratioOf(of(subject), of(against), 'p50')),
        fmt.ratio(ratioOf(of(subject), of(against), 'p99')),
        fmt.ratio(ratioOf(of(subject), of(against), 'mean')),
        ...(blocks.length > 0 ? [blocks.map(([from, to]) => fmt.ratio(ratioOf(of(subject, 'total', from, to), of(against, 'total', from, to), 'p50'))).join(', ')] : [])
      ]))
      console.log(`\nTimes are wall-clock on the client (performance.now()), from just before the request is written. ${describeLoad(loadReport)}`)
      if (loadReport.otherCores !== undefined && loadReport.otherCores > 0.1) console.error('\nWARNING: other processes used > 0.1 core during the run; tails are suspect, rerun on a quiet machine.')
      return true
    } finally {
      client.close()
      await server.stop()
    }
  }
}

export default askLatency
