import type { IncomingHttpHeaders } from 'node:http'

const SENTINEL_PREFIX = '=?base64?'
const SENTINEL_SUFFIX = '?='
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/
// RFC 9110 field values: visible ASCII, space and tab.
const FIELD_VALUE = /^[\x20-\x7e\t]*$/

/** Node joins repeated custom headers into one string; an array only comes from set-cookie-like headers. */
export function headerValue (headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name]
  return Array.isArray(value) ? undefined : value
}

/**
 * The value a mirrored header (`Mcp-Name`, `Mcp-Param-*`) stands for: the `=?base64?…?=`
 * sentinel decoded to UTF-8, anything else literally. `undefined` when the value is malformed
 * (characters outside RFC 9110 field values, bad or non-canonical Base64, or Base64 of invalid UTF-8).
 */
export function decodeMirroredValue (value: string): string | undefined {
  if (!FIELD_VALUE.test(value)) return undefined
  if (!value.startsWith(SENTINEL_PREFIX) || !value.endsWith(SENTINEL_SUFFIX) ||
    value.length < SENTINEL_PREFIX.length + SENTINEL_SUFFIX.length) return value
  const encoded = value.slice(SENTINEL_PREFIX.length, -SENTINEL_SUFFIX.length)
  if (!BASE64.test(encoded)) return undefined
  const bytes = Buffer.from(encoded, 'base64')
  // One encoding per value: the last character's spare bits must be zero, or two spellings decode alike.
  if (bytes.toString('base64') !== encoded) return undefined
  const text = bytes.toString('utf8')
  return Buffer.from(text, 'utf8').equals(bytes) ? text : undefined
}
