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

/** Which response bodies an `Accept` header allows. An absent header allows anything (RFC 9110 §12.5.1). */
export function acceptedResponses (header: string | undefined): AcceptedResponses {
  if (header === undefined || header.trim() === '') return { json: true, sse: true }
  let json = false
  let sse = false
  for (const range of header.split(',')) {
    const [type = '', ...params] = range.split(';')
    if (params.some(p => /^\s*q\s*=\s*0(?:\.0*)?\s*$/i.test(p))) continue
    switch (type.trim().toLowerCase()) {
      case '*/*': return { json: true, sse: true }
      case 'application/*':
      case 'application/json': json = true; break
      case 'text/*':
      case 'text/event-stream': sse = true; break
    }
  }
  return { json, sse }
}
