/** servers/plugin.ts loading the plugin from BENCH_BASELINE_ENTRY (another checkout's lib/index.ts): the baseline of the `regression` benchmark. */
import { servePlugin } from './plugin-app.js'

const entry = process.env.BENCH_BASELINE_ENTRY
if (entry === undefined || entry === '') throw new Error('BENCH_BASELINE_ENTRY must name the baseline plugin (…/lib/index.ts or a built …/dist/index.js)')
process.env.BENCH_PLUGIN_ENTRY = entry
await servePlugin()
