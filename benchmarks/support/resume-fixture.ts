/**
 * What resume.ts and its servers (servers/resume-node.ts, servers/resume-cost.ts) share: the secret
 * every node holds, the tools, and the wire of a legacy (2025-11-25) streamed call and of its resume
 * (`GET` with `Last-Event-ID`), as docs/resumability.md describes them.
 */
import type { StreamRequest } from './event-fixture.js'

/** The `secret` of every node (at least 32 bytes): an event id minted on one verifies on the others. */
export const RESUME_SECRET = 'bench-resume-node-secret-0123456789abcdef'

/** `sessions.secret` of the nodes when the replay runs with sessions. */
export const RESUME_SESSION_SECRET = 'bench-resume-session-secret-0123456789abcd'

/** The tool that reports `count` progress events, then waits until the benchmark releases it: `held <tag>`. */
export const HOLD_TOOL = 'hold'

/** The tool that reports `count` progress events as fast as it can, then answers `burst <count>`. */
export const BURST_TOOL = 'burst'

/** A POST carrying this header is watched by its node, which says over IPC when its response closed. */
export const TAG_HEADER = 'x-bench-tag'

const LEGACY = '2025-11-25'

/** A legacy `tools/call` of `name` with a progress token (so its progress is streamed), in `session` when given. */
export function streamedCall (id: number, name: string, args: Record<string, unknown>, extra: Record<string, string> = {}): StreamRequest {
  return {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': LEGACY, ...extra },
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args, _meta: { progressToken: `p${id}` } } })
  }
}

/** The resume of a stream after the event `lastEventId` (with the session's id when there is one). */
export function resumeRequest (lastEventId: string, extra: Record<string, string> = {}): StreamRequest {
  return { method: 'GET', headers: { accept: 'text/event-stream', 'mcp-protocol-version': LEGACY, 'last-event-id': lastEventId, ...extra }, body: undefined }
}

/** The result `hold` and `burst` answer call `id` with, as the JSON-RPC response the stream ends with. */
export function toolResult (id: number, text: string): Record<string, unknown> {
  return { jsonrpc: '2.0', id, result: { content: [{ type: 'text', text }] } }
}
