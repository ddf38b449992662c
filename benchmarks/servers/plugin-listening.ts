/**
 * The server of events.ts `idle-cost`: servers/plugin.ts with the listener bounds raised
 * (support/event-fixture.ts) so that its thousand idle listen streams, all from 127.0.0.1, are
 * admitted (the bounds are read only when a stream opens, never on a `tools/call`).
 */
import { MANY_LISTENERS } from '../support/event-fixture.js'
import { servePlugin } from './plugin-app.js'

await servePlugin({ events: MANY_LISTENERS })
