/** servers/plugin.ts with `tracing: false`: the baseline of the tracing-cost benchmark's no-SDK pair. */
import { servePlugin } from './plugin-app.js'

await servePlugin({ tracing: false })
