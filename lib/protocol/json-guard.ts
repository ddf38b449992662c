/**
 * A linear pre-scan of a JSON body for what `JSON.parse` accepts but a server should not: nesting
 * deeper than any MCP message needs (later recursive walks would blow the stack), more values than
 * any message needs, keys that pollute prototypes (`__proto__`, `constructor`), and duplicate keys
 * (a proxy reading the first and the server reading the last would disagree on what was asked).
 * Syntax is left to `JSON.parse`; this only looks at structure, in one pass, with no recursion.
 */

export interface JsonLimits {
  /** Deepest nesting of objects and arrays. */
  maxDepth: number
  /** Most values (containers and array/object members) in one body. */
  maxValues: number
}

const QUOTE = 0x22
const BACKSLASH = 0x5c
const COMMA = 0x2c
const OPEN_OBJECT = 0x7b
const CLOSE_OBJECT = 0x7d
const OPEN_ARRAY = 0x5b
const CLOSE_ARRAY = 0x5d
const COLON = 0x3a

const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor'])

/** Why the body is refused, or undefined when its structure is acceptable. */
export function jsonStructureViolation (text: string, limits: JsonLimits): string | undefined {
  // One entry per open container: the keys seen so far for an object, null for an array.
  const open: Array<Set<string> | null> = []
  let values = 0
  let expectKey = false
  for (let i = 0; i < text.length; i++) {
    switch (text.charCodeAt(i)) {
      case OPEN_OBJECT:
      case OPEN_ARRAY: {
        const isObject = text.charCodeAt(i) === OPEN_OBJECT
        open.push(isObject ? new Set() : null)
        if (open.length > limits.maxDepth) return `nesting deeper than ${limits.maxDepth}`
        if (++values > limits.maxValues) return `more than ${limits.maxValues} values`
        expectKey = isObject
        break
      }
      case CLOSE_OBJECT:
      case CLOSE_ARRAY:
        open.pop()
        expectKey = false
        break
      case COMMA:
        if (++values > limits.maxValues) return `more than ${limits.maxValues} values`
        expectKey = open.at(-1) != null
        break
      case COLON:
        expectKey = false
        break
      case QUOTE: {
        const end = closingQuote(text, i)
        if (end === -1) return undefined // unterminated: JSON.parse reports it
        if (expectKey) {
          const keys = open.at(-1)
          const key = decodeKey(text, i, end)
          if (key === undefined) return undefined
          if (FORBIDDEN_KEYS.has(key)) return `forbidden key "${key}"`
          if (keys != null) {
            if (keys.has(key)) return 'duplicate object key'
            keys.add(key)
          }
          expectKey = false
        }
        i = end
        break
      }
    }
  }
  return undefined
}

/** Index of the quote that closes the string opening at `start`, or -1. */
function closingQuote (text: string, start: number): number {
  let from = start + 1
  for (;;) {
    const quote = text.indexOf('"', from)
    if (quote === -1) return -1
    let backslashes = 0
    while (text.charCodeAt(quote - 1 - backslashes) === BACKSLASH) backslashes++
    if (backslashes % 2 === 0) return quote
    from = quote + 1
  }
}

function decodeKey (text: string, start: number, end: number): string | undefined {
  const raw = text.slice(start + 1, end)
  if (!raw.includes('\\')) return raw
  try {
    return JSON.parse(text.slice(start, end + 1)) as string
  } catch {
    return undefined
  }
}
