/**
 * servers/plugin.ts with the listener bounds raised (support/event-fixture.ts) so that the thousand
 * idle listen streams of events.ts `idle-cost`, all from 127.0.0.1, are admitted. Nothing else
 * differs: the bounds are read only when a stream opens, never on a `tools/call`.
 */
import { MANY_LISTENERS } from '../support/event-fixture.js'
import { servePlugin } from './plugin-app.js'

await servePlugin({ events: MANY_LISTENERS })
