/**
 * Metrics as Prometheus sees them: scraping a node's `/metrics`, reading the text exposition (format
 * 0.0.4) the way a scraper does, and running `promtool check metrics` on one. The parser is strict: a
 * line it cannot read throws, so a malformed exposition fails the test instead of silently losing samples.
 */
import { spawnSync } from 'node:child_process'

export interface Sample {
  /** The sample's own name (`x_bucket`, `x_sum`, `x_count` for histograms). */
  name: string
  labels: Record<string, string>
  value: number
}

export interface Family {
  name: string
  help: string | undefined
  type: string | undefined
  samples: Sample[]
}

export class Exposition {
  readonly families = new Map<string, Family>()

  /** The family a sample name belongs to (`x_bucket` → `x` when `x` is a histogram or summary). */
  familyOf (sampleName: string): Family | undefined {
    const direct = this.families.get(sampleName)
    if (direct !== undefined) return direct
    const base = sampleName.replace(/_(bucket|sum|count)$/, '')
    const family = this.families.get(base)
    return family?.type === 'histogram' || family?.type === 'summary' ? family : undefined
  }

  /** Every sample named `name` (in any family). */
  samples (name: string): Sample[] {
    return this.familyOf(name)?.samples.filter(sample => sample.name === name) ?? []
  }

  /**
   * The samples named `name` as `{ 'k=v,k2=v2': value }` (label pairs sorted by name; `''` for no
   * labels), so a whole series set can be compared with one `t.same`. `omit` drops labels (e.g. `le`).
   */
  series (name: string, omit: readonly string[] = []): Record<string, number> {
    const out: Record<string, number> = {}
    for (const sample of this.samples(name)) {
      const key = labelKey(sample.labels, omit)
      if (key in out) throw new Error(`duplicate series ${name}{${key}}`)
      out[key] = sample.value
    }
    return out
  }

  /** The value of the one sample `name{labels}` (labels must match exactly), or undefined. */
  value (name: string, labels: Record<string, string> = {}): number | undefined {
    return this.series(name)[labelKey(labels)]
  }

  /** The sum of the samples `name` whose labels include `labels` (0 when there are none). */
  sum (name: string, labels: Record<string, string> = {}): number {
    return this.samples(name).filter(sample => Object.entries(labels).every(([key, value]) => sample.labels[key] === value))
      .reduce((total, sample) => total + sample.value, 0)
  }

  /** Every sample of every family whose name starts with `prefix`. */
  allSamples (prefix = ''): Sample[] {
    return [...this.families.values()].filter(f => f.name.startsWith(prefix)).flatMap(f => f.samples)
  }
}

export function labelKey (labels: Record<string, string>, omit: readonly string[] = []): string {
  return Object.keys(labels).filter(k => !omit.includes(k)).sort().map(k => `${k}=${labels[k]!}`).join(',')
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/

/** Parses the text format; throws on any line that is not a comment, blank, or a well-formed sample. */
export function parseExposition (text: string): Exposition {
  const exposition = new Exposition()
  const family = (name: string): Family => {
    let f = exposition.families.get(name)
    if (f === undefined) exposition.families.set(name, f = { name, help: undefined, type: undefined, samples: [] })
    return f
  }
  text.split('\n').forEach((line, index) => {
    if (line.trim() === '') return
    const meta = /^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line)
    if (meta !== null) {
      const f = family(meta[2]!)
      if (meta[1] === 'HELP') f.help = meta[3]
      else f.type = meta[3]
      return
    }
    if (line.startsWith('#')) return
    const sample = parseSample(line)
    if (sample === undefined) throw new Error(`unparseable exposition line ${index + 1}: ${JSON.stringify(line)}`)
    const owner = exposition.familyOf(sample.name) ?? family(sample.name)
    owner.samples.push(sample)
  })
  return exposition
}

function parseSample (line: string): Sample | undefined {
  const name = NAME.exec(line)?.[0]
  if (name === undefined) return undefined
  let rest = line.slice(name.length)
  const labels: Record<string, string> = {}
  if (rest.startsWith('{')) {
    rest = rest.slice(1)
    for (;;) {
      rest = rest.replace(/^\s*,?\s*/, '')
      if (rest.startsWith('}')) { rest = rest.slice(1); break }
      const label = LABEL_NAME.exec(rest)?.[0]
      if (label === undefined || rest[label.length] !== '=' || rest[label.length + 1] !== '"') return undefined
      rest = rest.slice(label.length + 2)
      let value = ''
      let i = 0
      for (; i < rest.length && rest[i] !== '"'; i++) {
        if (rest[i] === '\\') {
          const next = rest[++i]
          value += next === 'n' ? '\n' : next ?? ''
        } else {
          value += rest[i]
        }
      }
      if (i >= rest.length) return undefined
      if (label in labels) return undefined
      labels[label] = value
      rest = rest.slice(i + 1)
    }
  }
  const fields = rest.trim().split(/\s+/)
  if (fields.length < 1 || fields.length > 2 || fields[0] === '') return undefined
  // Prometheus reads values with Go's ParseFloat: Inf and NaN in any case (prom-client writes `Nan`).
  const raw = fields[0]!.toLowerCase()
  const special: Record<string, number> = { '+inf': Infinity, inf: Infinity, '-inf': -Infinity, nan: NaN }
  const value = raw in special ? special[raw]! : Number(raw)
  if (Number.isNaN(value) && raw !== 'nan') return undefined
  return { name, labels, value }
}

/** Only the families whose name starts with `prefix`, re-serialised as they came (HELP, TYPE, samples). */
export function familiesText (text: string, prefix: string): string {
  const out: string[] = []
  let keep = false
  for (const line of text.split('\n')) {
    const meta = /^# (?:HELP|TYPE) (\S+)/.exec(line)
    if (meta !== null) keep = meta[1]!.startsWith(prefix)
    else if (line.trim() !== '' && !line.startsWith('#')) keep = NAME.exec(line)?.[0]?.startsWith(prefix) === true
    if (keep && line.trim() !== '') out.push(line)
  }
  return out.join('\n') + '\n'
}

export interface PromtoolResult {
  status: number | null
  /** stdout and stderr, split into non-empty lines. */
  lines: string[]
}

/** `promtool` on PATH (or $PROMTOOL), or undefined when it is not installed. */
export function findPromtool (): string | undefined {
  const candidate = process.env.PROMTOOL ?? 'promtool'
  const probe = spawnSync(candidate, ['--version'], { encoding: 'utf8' })
  return probe.error === undefined && probe.status === 0 ? candidate : undefined
}

/** Pipes `text` into `promtool check metrics`. */
export function promtoolCheck (promtool: string, text: string): PromtoolResult {
  const run = spawnSync(promtool, ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 30_000 })
  if (run.error !== undefined) throw run.error
  const lines = `${run.stdout}\n${run.stderr}`.split('\n').map(l => l.trim()).filter(l => l !== '')
  return { status: run.status, lines }
}

/** GETs `url` and returns status, content type and body text. */
export async function scrape (url: URL | string, headers: Record<string, string> = {}): Promise<{ status: number, contentType: string | null, text: string }> {
  const response = await fetch(url, { headers })
  return { status: response.status, contentType: response.headers.get('content-type'), text: await response.text() }
}

/** The `/metrics` of the server whose MCP endpoint is `url`, parsed. */
export async function scrapeMetrics (url: URL): Promise<Exposition> {
  return parseExposition((await scrape(new URL('/metrics', url))).text)
}

/** The value of `name{labels}` in the `/metrics` of the server at `url` (labels must match exactly), or undefined when absent. */
export async function metricValue (url: URL, name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
  return (await scrapeMetrics(url)).value(name, labels)
}

/** The sum of the samples `name` whose labels include `labels` in the `/metrics` of the server at `url` (0 when there are none). */
export async function metricSum (url: URL, name: string, labels: Record<string, string> = {}): Promise<number> {
  return (await scrapeMetrics(url)).sum(name, labels)
}
