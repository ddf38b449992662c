/**
 * Client-supplied text that we store, log or echo (cancellation reasons, method names, versions) is
 * made safe once, here: bounded in bytes before any scan (so the cost is linear in a fixed bound),
 * stripped of controls and of the invisible/bidi characters that forge log lines or hide text, then
 * cut to a number of graphemes so a cut never splits a user-perceived character.
 */

const MAX_GRAPHEMES = 200
const BYTES_PER_GRAPHEME = 4

// C0 (tab, CR and LF included), DEL, C1, ALM, zero-width and bidi marks/embeddings/isolates, BOM.
// eslint-disable-next-line no-control-regex -- matching control characters is what this does
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060\u2066-\u2069\ufeff]/g

const graphemes = new Intl.Segmenter('en', { granularity: 'grapheme' })

export function sanitizeText (value: unknown, maxGraphemes = MAX_GRAPHEMES): string {
  const text = clampUtf8(stringify(value), maxGraphemes * BYTES_PER_GRAPHEME).replace(UNSAFE, '')
  return text.length <= maxGraphemes ? text : firstGraphemes(text, maxGraphemes)
}

/** A cancellation reason: absent or `null` stays `null`, anything else becomes safe text. */
export function sanitizeReason (value: unknown): string | null {
  return value === null || value === undefined ? null : sanitizeText(value)
}

function stringify (value: unknown): string {
  if (typeof value === 'string') return value
  if (typeof value === 'bigint' || typeof value === 'symbol' || typeof value === 'function') return String(value)
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return String(value)
  }
}

/** Cuts to at most `maxBytes` of UTF-8 without splitting a code point. */
function clampUtf8 (text: string, maxBytes: number): string {
  if (text.length * 3 <= maxBytes) return text
  const bytes = Buffer.from(text, 'utf8')
  if (bytes.length <= maxBytes) return text
  let end = maxBytes
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--
  return bytes.toString('utf8', 0, end)
}

function firstGraphemes (text: string, max: number): string {
  let out = ''
  let count = 0
  for (const { segment } of graphemes.segment(text)) {
    if (count++ === max) break
    out += segment
  }
  return out
}
