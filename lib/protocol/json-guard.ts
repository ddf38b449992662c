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

const FORBIDDEN_KEYS = ['__proto__', 'constructor']
/** Up to this many keys, an object's duplicates are found by comparing in place; beyond, by a Set. */
const SCAN_KEYS = 16

// The scan is synchronous, so one set of stacks serves every call and the common body allocates
// nothing: no Set per object, no string per key.
/** Per open container: the index of its first key in the key stack, or -1 for an array. */
const firstKeys: number[] = []
/** Per open container: its keys as a Set, once it has more than SCAN_KEYS of them. */
const keySets: Array<Set<string> | undefined> = []
/** The keys of the open objects: `[start, end)` of the raw text, or the decoded text of a key with escapes. */
const keyStarts: number[] = []
const keyEnds: number[] = []
const keyTexts: Array<string | undefined> = []

/** Why the body is refused, or undefined when its structure is acceptable. */
export function jsonStructureViolation (text: string, limits: JsonLimits): string | undefined {
  firstKeys.length = keySets.length = 0
  truncateKeys(0)
  let values = 0
  let expectKey = false
  for (let i = 0; i < text.length; i++) {
    switch (text.charCodeAt(i)) {
      case OPEN_OBJECT:
      case OPEN_ARRAY: {
        const isObject = text.charCodeAt(i) === OPEN_OBJECT
        firstKeys.push(isObject ? keyStarts.length : -1)
        keySets.push(undefined)
        if (firstKeys.length > limits.maxDepth) return `nesting deeper than ${limits.maxDepth}`
        if (++values > limits.maxValues) return `more than ${limits.maxValues} values`
        expectKey = isObject
        break
      }
      case CLOSE_OBJECT:
      case CLOSE_ARRAY: {
        const firstKey = firstKeys.pop()
        keySets.pop()
        if (firstKey !== undefined && firstKey !== -1) truncateKeys(firstKey)
        expectKey = false
        break
      }
      case COMMA:
        if (++values > limits.maxValues) return `more than ${limits.maxValues} values`
        expectKey = firstKeys.length > 0 && firstKeys[firstKeys.length - 1] !== -1
        break
      case COLON:
        expectKey = false
        break
      case QUOTE: {
        const end = closingQuote(text, i)
        if (end === -1) return undefined // unterminated: JSON.parse reports it
        if (expectKey) {
          const violation = addKey(text, i + 1, end)
          if (violation !== undefined) return violation === '' ? undefined : violation
          expectKey = false
        }
        i = end
        break
      }
    }
  }
  return undefined
}

/**
 * Records the key `text[start, end)` of the innermost open object. Returns why it is refused
 * (forbidden, or repeated), '' when it cannot be decoded (JSON.parse reports that), else undefined.
 */
function addKey (text: string, start: number, end: number): string | undefined {
  const decoded = hasEscape(text, start, end) ? decodeKey(text, start, end) : undefined
  if (decoded === '') return ''
  for (const forbidden of FORBIDDEN_KEYS) {
    if (decoded === undefined ? rangeEquals(text, start, end, forbidden) : decoded === forbidden) return `forbidden key "${forbidden}"`
  }
  const depth = firstKeys.length - 1
  const firstKey = firstKeys[depth]
  if (firstKey === undefined || firstKey === -1) return undefined
  const keys = keySets[depth]
  if (keys !== undefined) {
    const key = decoded ?? text.slice(start, end)
    if (keys.has(key)) return 'duplicate object key'
    keys.add(key)
    return undefined
  }
  for (let k = firstKey; k < keyStarts.length; k++) {
    if (sameKey(text, k, start, end, decoded)) return 'duplicate object key'
  }
  keyStarts.push(start)
  keyEnds.push(end)
  keyTexts.push(decoded)
  if (keyStarts.length - firstKey > SCAN_KEYS) {
    // A large object: a Set from here on, so that a body of many keys stays linear.
    const set = keySets[depth] = new Set()
    for (let k = firstKey; k < keyStarts.length; k++) set.add(keyTexts[k] ?? text.slice(keyStarts[k], keyEnds[k]))
    truncateKeys(firstKey)
  }
  return undefined
}

function truncateKeys (length: number): void {
  keyStarts.length = keyEnds.length = keyTexts.length = length
}

function hasEscape (text: string, start: number, end: number): boolean {
  for (let i = start; i < end; i++) if (text.charCodeAt(i) === BACKSLASH) return true
  return false
}

/** Whether recorded key `k` equals the key `text[start, end)` (whose text is `decoded` when it has escapes). */
function sameKey (text: string, k: number, start: number, end: number, decoded: string | undefined): boolean {
  const other = keyTexts[k]
  if (decoded !== undefined) return other === undefined ? rangeEquals(text, keyStarts[k]!, keyEnds[k]!, decoded) : other === decoded
  if (other !== undefined) return rangeEquals(text, start, end, other)
  const otherStart = keyStarts[k]!
  const length = end - start
  if (keyEnds[k]! - otherStart !== length) return false
  for (let i = 0; i < length; i++) if (text.charCodeAt(start + i) !== text.charCodeAt(otherStart + i)) return false
  return true
}

function rangeEquals (text: string, start: number, end: number, value: string): boolean {
  return end - start === value.length && text.startsWith(value, start)
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

/** The text of a key with escapes (`start`, `end`: its first character and closing quote); '' when invalid. */
function decodeKey (text: string, start: number, end: number): string {
  try {
    return JSON.parse(text.slice(start - 1, end + 1)) as string
  } catch {
    return ''
  }
}
