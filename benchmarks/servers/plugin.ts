/** The plugin under test: default options (stateless, responseMode 'auto', metrics on) and the `echo` tool. */
import { servePlugin } from './plugin-app.js'

await servePlugin()
