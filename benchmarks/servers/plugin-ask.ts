/**
 * servers/plugin.ts (default options, `echo`) plus a `secret` and an `ask` tool, for ask-latency.ts:
 * `ask` elicits one string (`ctx.elicit`, so under the automatic key `elicitation-1`) and returns its
 * `text` argument and the answer joined by a colon. In the legacy era (2025-11-25) the ask goes out on
 * the response's SSE stream and the handler waits for the client's answer POST; in 2026-07-28 the first
 * request ends with `input_required` and the retry carrying the answer gets the result.
 */
import { ASK_ELICITATION, ASK_SECRET, askText } from '../support/ask-fixture.js'
import { servePlugin } from './plugin-app.js'

await servePlugin({ secret: ASK_SECRET }, app => {
  app.mcp.tool<{ text: string }>({
    name: 'ask',
    description: 'Elicits a name; returns "<text>:<name>"',
    inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
    handler: async ({ text }, ctx) => {
      const answer = await ctx.elicit(ASK_ELICITATION)
      return { content: [{ type: 'text', text: askText(text, answer.action === 'accept' ? String(answer.content?.name) : `(${answer.action})`) }] }
    }
  })
})
