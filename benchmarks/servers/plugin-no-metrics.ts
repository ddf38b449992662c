/** servers/plugin.ts with `metrics: false`: the baseline of the metrics-cost benchmark. */
import { servePlugin } from './plugin-app.js'

await servePlugin({ metrics: false })
