/**
 * A real Prometheus server, as an operator runs one in front of the plugin: its own config (static
 * targets of one job, rule files), its own TSDB in a temp dir, on a free loopback port, scraping every
 * second. Queried through its HTTP API (`/api/v1/…`); killed and its dir removed at teardown, or at the
 * latest when this process dies (a watchdog on a stdin pipe, as for redis-server).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { freePort } from './redis-server.js'
import type { Teardown } from './teardown.js'

const READY_TIMEOUT_MS = 15_000

/** `prometheus` on PATH (or $PROMETHEUS), or undefined when it is not installed. */
export function findPrometheus (): string | undefined {
  const candidate = process.env.PROMETHEUS ?? 'prometheus'
  const probe = spawnSync(candidate, ['--version'], { encoding: 'utf8' })
  return probe.error === undefined && probe.status === 0 ? candidate : undefined
}

/**
 * Prometheus runs under a small `sh` holding the read end of our stdin pipe: once the pipe closes
 * (teardown, or this process dying however it dies) the watcher SIGKILLs it; the `sh` exits with it.
 * (A background job's stdin is /dev/null, hence the pipe kept on fd 3.)
 */
const WATCHDOG = [
  'exec 3<&0',
  '"$0" "$@" </dev/null 3<&- & pid=$!',
  '( read _ <&3; kill -9 "$pid" 2>/dev/null ) </dev/null >/dev/null 2>&1 &',
  'wait "$pid"'
].join('\n')

export interface PrometheusOptions {
  /** The scrape job's name (what alert rules select with `job=`). */
  job: string
  /** `host:port` of each node; `/metrics` is scraped. */
  targets: readonly string[]
  /** Rule files to load, by absolute path. */
  ruleFiles?: readonly string[]
}

/** One series of an instant vector, as `/api/v1/query` answers it. */
export interface VectorSample {
  metric: Record<string, string>
  value: [number, string]
}

/** A rule as `/api/v1/rules` reports it. */
export interface RuleState {
  name: string
  type: 'alerting' | 'recording'
  health: string
  lastError?: string
  lastEvaluation: string
  state?: string
  alerts?: Array<{ labels: Record<string, string>, state: string }>
}

export class PrometheusServer {
  readonly url: URL
  readonly #shell: ChildProcess
  readonly #exited: Promise<unknown>
  #output = ''

  private constructor (url: URL, shell: ChildProcess) {
    this.url = url
    this.#shell = shell
    this.#exited = once(shell, 'exit')
    const keep = (chunk: Buffer): void => { this.#output = (this.#output + chunk.toString('utf8')).slice(-20_000) }
    shell.stdout!.on('data', keep)
    shell.stderr!.on('data', keep)
    shell.stdin!.on('error', () => {})
  }

  /** Starts Prometheus scraping `options.targets` every second; resolves once it reports ready. */
  static async start (t: Teardown, binary: string, options: PrometheusOptions): Promise<PrometheusServer> {
    const dir = mkdtempSync(join(tmpdir(), 'prometheus-'))
    const port = await freePort()
    // JSON is YAML: no YAML writer needed.
    const config = {
      global: { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' },
      rule_files: options.ruleFiles ?? [],
      scrape_configs: [{ job_name: options.job, static_configs: [{ targets: options.targets }] }]
    }
    writeFileSync(join(dir, 'prometheus.yml'), JSON.stringify(config, null, 2))
    const shell = spawn('/bin/sh', ['-c', WATCHDOG, binary,
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn'
    ], { stdio: ['pipe', 'pipe', 'pipe'] })
    const server = new PrometheusServer(new URL(`http://127.0.0.1:${port}/`), shell)
    t.teardown(async () => {
      await server.stop()
      rmSync(dir, { recursive: true, force: true })
    })
    let exited = false
    void server.#exited.then(() => { exited = true })
    const deadline = Date.now() + READY_TIMEOUT_MS
    while (!await server.#ready()) {
      if (exited || Date.now() >= deadline) {
        await server.stop()
        throw new Error(`prometheus ${exited ? 'exited' : 'was not ready'} before answering /-/ready:\n${server.output()}`)
      }
      await sleep(50)
    }
    return server
  }

  async #ready (): Promise<boolean> {
    try {
      return (await fetch(new URL('/-/ready', this.url))).status === 200
    } catch {
      return false
    }
  }

  /** The tail of its log. */
  output (): string {
    return this.#output
  }

  /** The `data` of a GET of `/api/v1/<path>`; throws on anything but `status: success`. */
  async api<T> (path: string, params: Record<string, string | string[]> = {}): Promise<T> {
    const url = new URL(`/api/v1/${path}`, this.url)
    for (const [key, value] of Object.entries(params)) {
      for (const one of Array.isArray(value) ? value : [value]) url.searchParams.append(key, one)
    }
    const response = await fetch(url)
    const body = await response.json() as { status: string, data: T, error?: string, errorType?: string }
    if (body.status !== 'success') throw new Error(`${url.pathname}: ${body.errorType ?? response.status}: ${body.error ?? ''}`)
    return body.data
  }

  /** An instant query (`/api/v1/query`): its series. */
  async query (expr: string): Promise<VectorSample[]> {
    const data = await this.api<{ resultType: string, result: VectorSample[] }>('query', { query: expr })
    if (data.resultType !== 'vector') throw new Error(`${expr}: a ${data.resultType}, not a vector`)
    return data.result
  }

  /**
   * Waits until every target has been scraped successfully (Prometheus applies discovered targets at
   * most every 5 s, so the first scrape comes a few seconds after it is ready); false after `timeoutMs`.
   */
  async targetsUp (timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const { activeTargets } = await this.api<{ activeTargets: Array<{ health: string }> }>('targets')
      if (activeTargets.length > 0 && activeTargets.every(target => target.health === 'up')) return true
      if (Date.now() >= deadline) return false
      await sleep(100)
    }
  }

  /** Every rule of every loaded group (`/api/v1/rules`). */
  async rules (): Promise<RuleState[]> {
    const data = await this.api<{ groups: Array<{ rules: RuleState[] }> }>('rules')
    return data.groups.flatMap(group => group.rules)
  }

  /** Kills it (closing the watchdog's pipe, which also releases the watcher) and resolves once it is gone. */
  async stop (): Promise<void> {
    this.#shell.stdin!.end()
    await this.#exited
  }
}
