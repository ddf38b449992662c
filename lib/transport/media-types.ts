/** Content negotiation for the MCP endpoint: media types are parsed, never substring-matched. */

export interface AcceptedResponses {
  json: boolean
  sse: boolean
}

/** The bare media type of a Content-Type value, lowercased, without parameters. */
export function mediaType (header: string | undefined): string | undefined {
  if (header === undefined) return undefined
  const semicolon = header.indexOf(';')
  return (semicolon === -1 ? header : header.slice(0, semicolon)).trim().toLowerCase()
}

const NEITHER: AcceptedResponses = Object.freeze({ json: false, sse: false })
const JSON_ONLY: AcceptedResponses = Object.freeze({ json: true, sse: false })
const SSE_ONLY: AcceptedResponses = Object.freeze({ json: false, sse: true })
const BOTH: AcceptedResponses = Object.freeze({ json: true, sse: true })

/** A client sends the same Accept value on every request, so parses are remembered: this many values of up to 256 characters. */
const REMEMBERED_ACCEPT_VALUES = 64
const REMEMBERED_ACCEPT_LENGTH = 256

/** Which response bodies an `Accept` header allows; one per endpoint, with its own memory of the values it parsed. */
export class AcceptedResponseTypes {
  readonly #remembered = new Map<string, AcceptedResponses>()

  /** An absent header allows anything (RFC 9110 §12.5.1). */
  of (header: string | undefined): AcceptedResponses {
    if (header === undefined) return BOTH
    let accepted = this.#remembered.get(header)
    if (accepted === undefined) {
      accepted = parseAccept(header)
      if (this.#remembered.size < REMEMBERED_ACCEPT_VALUES && header.length <= REMEMBERED_ACCEPT_LENGTH) this.#remembered.set(header, accepted)
    }
    return accepted
  }
}

function parseAccept (header: string): AcceptedResponses {
  if (header.trim() === '') return BOTH
  let json = false
  let sse = false
  for (const range of header.split(',')) {
    const [type = '', ...params] = range.split(';')
    if (params.some(p => /^\s*q\s*=\s*0(?:\.0*)?\s*$/i.test(p))) continue
    switch (type.trim().toLowerCase()) {
      case '*/*': return BOTH
      case 'application/*':
      case 'application/json': json = true; break
      case 'text/*':
      case 'text/event-stream': sse = true; break
    }
  }
  return json ? (sse ? BOTH : JSON_ONLY) : (sse ? SSE_ONLY : NEITHER)
}
