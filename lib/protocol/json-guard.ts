/**
 * A linear pre-scan of a JSON body for what `JSON.parse` accepts but a server should not: nesting
 * deeper than any MCP message needs (later recursive walks would blow the stack), more values than
 * any message needs, duplicate keys (a proxy reading the first and the server reading the last would
 * disagree on what was asked), and exactly the prototype-pollution shapes that secure-json-parse
 * (Fastify's own JSON guard) refuses: a `__proto__` key anywhere, and a `constructor` key whose value
 * is an object with a direct `prototype` key. A `constructor` holding anything else (`"Foo"`, an
 * object without `prototype`, an array) is ordinary data. Keys are compared by their decoded text,
 * so escaped spellings count as the words themselves.
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

const PROTO = '__proto__'
const CONSTRUCTOR = 'constructor'
const PROTOTYPE = 'prototype'
const PROTO_VIOLATION = `forbidden key "${PROTO}"`
const CONSTRUCTOR_VIOLATION = `"${CONSTRUCTOR}" holding a "${PROTOTYPE}"`
/** Up to this many keys, an object's duplicates are found by comparing in place; beyond, by a Set. */
const SCAN_KEYS = 16

/** Why the body is refused, or undefined when its structure is acceptable. */
export function jsonStructureViolation (text: string, limits: JsonLimits): string | undefined {
  const open = openContainers.reset()
  let values = 0
  let expectKey = false
  for (let i = 0; i < text.length; i++) {
    switch (text.charCodeAt(i)) {
      case OPEN_OBJECT:
      case OPEN_ARRAY: {
        expectKey = text.charCodeAt(i) === OPEN_OBJECT
        if (open.push(expectKey) > limits.maxDepth) return `nesting deeper than ${limits.maxDepth}`
        if (++values > limits.maxValues) return `more than ${limits.maxValues} values`
        break
      }
      case CLOSE_OBJECT:
      case CLOSE_ARRAY:
        open.pop()
        expectKey = false
        break
      case COMMA:
        if (++values > limits.maxValues) return `more than ${limits.maxValues} values`
        expectKey = open.inObject
        break
      case COLON:
        expectKey = false
        break
      case QUOTE: {
        const end = closingQuote(text, i)
        if (end === -1) return undefined // unterminated: JSON.parse reports it
        if (expectKey) {
          const violation = open.addKey(text, i + 1, end)
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
 * The containers open at one point of a scan, and the keys of the open objects: `[start, end)` of a
 * key's raw text, or its decoded text when it has escapes. The common body thus makes no Set per
 * object and no string per key. A scan is synchronous, so one instance serves every scan.
 *
 * A `constructor` key leaves its value pending: the next token is the value (the colon aside), so an
 * object opened right then is a constructor object, in which a `prototype` key is refused. Any other
 * value clears it with no work per value token: an array is opened, and a string, number or literal is
 * followed by the next key (which sets the flag afresh) or by the close of its object (which clears it).
 * So an object opening in an array is never taken for a constructor object: only a key sets the flag,
 * and the key's object has closed before the array's next element begins.
 */
class OpenContainers {
  #depth = 0
  /** Per depth: the index of the container's first key, or -1 for an array. */
  readonly #firstKeys: number[] = []
  /** Per depth: whether the container is an object that is the value of a `constructor` key. */
  readonly #constructorValues: boolean[] = []
  /** Whether the last key read was `constructor` and no container has opened or closed since. */
  #constructorPending = false
  /** Per depth: the container's keys as a Set, once it has more than SCAN_KEYS of them. */
  readonly #keySets: Array<Set<string> | undefined> = []
  #keyCount = 0
  readonly #keyStarts: number[] = []
  readonly #keyEnds: number[] = []
  readonly #keyTexts: Array<string | undefined> = []

  reset (): this {
    this.#depth = 0
    this.#keyCount = 0
    this.#constructorPending = false
    return this
  }

  /** Opens an object or an array (which may be the pending constructor value); returns the new depth. */
  push (isObject: boolean): number {
    this.#firstKeys[this.#depth] = isObject ? this.#keyCount : -1
    this.#keySets[this.#depth] = undefined
    this.#constructorValues[this.#depth] = isObject && this.#constructorPending
    this.#constructorPending = false
    return ++this.#depth
  }

  pop (): void {
    this.#constructorPending = false
    if (this.#depth === 0) return
    const firstKey = this.#firstKeys[--this.#depth]!
    if (firstKey !== -1) this.#keyCount = firstKey
    this.#keySets[this.#depth] = undefined
  }

  get inObject (): boolean {
    return this.#depth > 0 && this.#firstKeys[this.#depth - 1] !== -1
  }

  /**
   * Records the key `text[start, end)` of the innermost open object. Returns why it is refused
   * (forbidden, or repeated), '' when it cannot be decoded (JSON.parse reports that), else undefined.
   */
  addKey (text: string, start: number, end: number): string | undefined {
    const decoded = hasEscape(text, start, end) ? decodeKey(text, start, end) : undefined
    if (decoded === '') return ''
    if (isKey(text, start, end, decoded, PROTO)) return PROTO_VIOLATION
    if (!this.inObject) return undefined
    const depth = this.#depth - 1
    if (this.#constructorValues[depth] === true && isKey(text, start, end, decoded, PROTOTYPE)) return CONSTRUCTOR_VIOLATION
    this.#constructorPending = isKey(text, start, end, decoded, CONSTRUCTOR)
    const firstKey = this.#firstKeys[depth]!
    const keys = this.#keySets[depth]
    if (keys !== undefined) {
      const key = decoded ?? text.slice(start, end)
      if (keys.has(key)) return 'duplicate object key'
      keys.add(key)
      return undefined
    }
    for (let k = firstKey; k < this.#keyCount; k++) {
      if (this.#sameKey(text, k, start, end, decoded)) return 'duplicate object key'
    }
    const k = this.#keyCount++
    this.#keyStarts[k] = start
    this.#keyEnds[k] = end
    this.#keyTexts[k] = decoded
    if (this.#keyCount - firstKey > SCAN_KEYS) {
      // A large object: a Set from here on, so that a body of many keys stays linear.
      const set = this.#keySets[depth] = new Set()
      for (let i = firstKey; i < this.#keyCount; i++) set.add(this.#keyTexts[i] ?? text.slice(this.#keyStarts[i], this.#keyEnds[i]))
      this.#keyCount = firstKey
    }
    return undefined
  }

  /** Whether recorded key `k` equals the key `text[start, end)` (whose text is `decoded` when it has escapes). */
  #sameKey (text: string, k: number, start: number, end: number, decoded: string | undefined): boolean {
    const other = this.#keyTexts[k]
    const otherStart = this.#keyStarts[k]!
    const otherEnd = this.#keyEnds[k]!
    if (decoded !== undefined) return other === undefined ? rangeEquals(text, otherStart, otherEnd, decoded) : other === decoded
    if (other !== undefined) return rangeEquals(text, start, end, other)
    const length = end - start
    if (otherEnd - otherStart !== length) return false
    for (let i = 0; i < length; i++) if (text.charCodeAt(start + i) !== text.charCodeAt(otherStart + i)) return false
    return true
  }
}

const openContainers = new OpenContainers()

function hasEscape (text: string, start: number, end: number): boolean {
  for (let i = start; i < end; i++) if (text.charCodeAt(i) === BACKSLASH) return true
  return false
}

function rangeEquals (text: string, start: number, end: number, value: string): boolean {
  return end - start === value.length && text.startsWith(value, start)
}

/** Whether the key `text[start, end)` (whose text is `decoded` when it has escapes) is `word`. */
function isKey (text: string, start: number, end: number, decoded: string | undefined, word: string): boolean {
  return decoded === undefined ? rangeEquals(text, start, end, word) : decoded === word
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
