/**
 * The JSON structure guard (DESIGN §5 Limits) on its own: duplicate keys and the keys
 * secure-json-parse (Fastify's own JSON guard) refuses, however they are spelled: `__proto__` anywhere,
 * and `constructor` only when its value is an object with a direct `prototype` key; ordinary data that
 * merely uses those words is accepted. In small objects (compared in place) and large ones (a Set past 16
 * keys), at any depth, checked against secure-json-parse itself on generated bodies, and the scan's
 * shared state never leaking from one body into the next. The HTTP answers to the same bodies are in
 * test/protocol/hostile-input.test.ts.
 */
import { createRequire } from 'node:module'
import fc from 'fast-check'
import t from 'tap'
import { jsonStructureViolation } from '../../lib/protocol/json-guard.js'

const LIMITS = { maxDepth: 64, maxValues: 10_000 }
const check = (text: string): string | undefined => jsonStructureViolation(text, LIMITS)
/** An object literal with keys k0…k(n-1), then `extra` members. */
const wide = (n: number, extra = ''): string => `{${Array.from({ length: n }, (_, i) => `"k${i}":${i}`).join(',')}${extra}}`

const PROTO = 'forbidden key "__proto__"'
const CONSTRUCTOR = '"constructor" holding a "prototype"'

/** secure-json-parse as Fastify itself resolves it (its default body parser's guard). */
const secureJson = createRequire(createRequire(import.meta.url).resolve('fastify'))('secure-json-parse') as {
  parse: (text: string) => unknown
}
/** Whether secure-json-parse (both actions 'error', its defaults) refuses `text`. */
function secureJsonRefuses (text: string): boolean {
  try {
    secureJson.parse(text)
    return false
  } catch {
    return true
  }
}

t.test('a duplicate key is found in small and in large objects, wherever it repeats', async t => {
  t.equal(check('{"a":1,"a":2}'), 'duplicate object key')
  t.equal(check('{"a":1,"b":2,"c":3,"b":4}'), 'duplicate object key')
  for (const n of [15, 16, 17, 40]) {
    t.equal(check(wide(n, ',"k0":0')), 'duplicate object key', `first key repeated after ${n} keys`)
    t.equal(check(wide(n, `,"k${n - 1}":0`)), 'duplicate object key', `last key repeated after ${n} keys`)
    t.equal(check(wide(n)), undefined, `${n} distinct keys`)
  }
})

t.test('keys are compared by their decoded text, not their spelling', async t => {
  t.equal(check('{"a":1,"\\u0061":2}'), 'duplicate object key', 'plain, then escaped')
  t.equal(check('{"\\u0061":1,"a":2}'), 'duplicate object key', 'escaped, then plain')
  t.equal(check('{"\\u0061":1,"\\u0061":2}'), 'duplicate object key', 'escaped twice')
  t.equal(check(wide(20, ',"\\u006b3":0')), 'duplicate object key', 'escaped spelling of k3 in a large object')
  t.equal(check('{"a\\"b":1,"a\\"c":2}'), undefined, 'escaped quotes inside different keys')
  t.equal(check('{"ab":1,"a":2,"b":3}'), undefined, 'a prefix is not the key')
  t.equal(check('{"\\u00e9":1,"é":2}'), 'duplicate object key', 'non-ASCII, escaped and literal')
})

t.test('__proto__ is refused as a key in any spelling, at any depth, whatever its value', async t => {
  t.equal(check('{"__proto__":{}}'), PROTO)
  t.equal(check('{"__proto__":1}'), PROTO)
  t.equal(check('{"a":{"b":[{"__proto__":null}]}}'), PROTO)
  t.equal(check('{"\\u005f_proto__":{}}'), PROTO)
  t.equal(check('{"__pro\\u0074o__":{}}'), PROTO)
  t.equal(check('{"\\u005F\\u005Fproto\\u005F\\u005F":"x"}'), PROTO, 'upper-case hex digits')
  t.equal(check(wide(30, ',"\\u005f_proto__":1')), PROTO, 'in a large object')
  t.equal(check('{"constructor":{"__proto__":1}}'), PROTO, 'inside a constructor object')
  t.equal(check('{"__proto":1,"proto__":2,"x":"__proto__","y":["__proto__"]}'), undefined, 'near misses, and the word as a value')
})

t.test('constructor is refused only when its value is an object with a direct prototype key', async t => {
  const refused: Array<[string, string]> = [
    ['{"constructor":{"prototype":{}}}', 'the classic payload'],
    ['{"constructor":{"prototype":1}}', 'prototype holding a number'],
    ['{"constructor":{"prototype":null}}', 'prototype holding null'],
    ['{"constructor":{"prototype":"x"}}', 'prototype holding a string'],
    ['{"constructor":{"name":"x","prototype":[]}}', 'prototype after another key'],
    ['{"constructor":{"a":{"b":1},"c":[1,{"d":2}],"prototype":1}}', 'prototype after nested members'],
    ['{ "constructor" : { "prototype" : 1 } }', 'whitespace around the tokens'],
    ['{"a":1,"constructor":{"prototype":1},"b":2}', 'constructor among other keys'],
    ['{"a":{"b":[{"constructor":{"prototype":1}}]}}', 'inside an array inside objects'],
    ['[[{"x":{"constructor":{"prototype":1}}}]]', 'under arrays at the top'],
    ['{"constructor":{"constructor":{"prototype":1}}}', 'a constructor inside a constructor object'],
    ['{"constructor":{"x":"y"},"z":{"constructor":{"prototype":1}}}', 'a second, offending constructor']
  ]
  for (const [body, what] of refused) {
    t.equal(check(body), CONSTRUCTOR, what)
    t.ok(secureJsonRefuses(body), `${what}: secure-json-parse refuses it too`)
  }
  const accepted: Array<[string, string]> = [
    ['{"constructor":"Foo"}', 'a string'],
    ['{"constructor":5}', 'a number'],
    ['{"constructor":null}', 'null'],
    ['{"constructor":true,"x":1}', 'a literal'],
    ['{"constructor":{}}', 'an empty object'],
    ['{"constructor":{"name":"x"}}', 'an object without prototype'],
    ['{"constructor":[{"prototype":1}]}', 'an array of objects with prototype'],
    ['{"constructor":["prototype"]}', 'an array holding the word'],
    ['{"constructor":{"a":"prototype"}}', 'the word as a value'],
    ['{"constructor":5,"x":{"prototype":1}}', 'a number, then prototype in a sibling'],
    ['{"constructor":"Foo","x":{"prototype":1}}', 'a string, then prototype in a sibling'],
    ['{"constructor":null,"x":{"prototype":1}}', 'null, then prototype in a sibling'],
    ['{"constructor" : 5 , "x" : {"prototype":1}}', 'the same with whitespace'],
    ['{"constructor":[],"x":{"prototype":1}}', 'an empty array, then prototype in a sibling'],
    ['{"constructor":[1],"x":{"prototype":1}}', 'an array, then prototype in a sibling'],
    ['{"constructor":{"a":1},"prototype":1}', 'prototype beside constructor, not in it'],
    ['{"constructor":{"a":{}},"x":{"prototype":1}}', 'prototype after the constructor object closed'],
    ['{"prototype":1}', 'prototype alone'],
    ['{"prototype":{"constructor":1}}', 'the other way round'],
    ['{"prototype":{"constructor":{"name":"x"}}}', 'constructor object inside prototype, without prototype'],
    ['[{"constructor":1},{"prototype":1}]', 'siblings in an array'],
    ['{"a":{"constructor":{"deep":{"prototype":1}}}}', 'prototype not a direct member of the constructor object'],
    ['{"constructor":{"deep":[{"prototype":1}]}}', 'prototype in an array in the constructor object'],
    ['{"constructors":{"prototype":1},"Constructor":{"prototype":1},"constructor_":{"prototype":1}}', 'near misses'],
    ['{"constructor":{"prototypes":1,"Prototype":2,"prototyp":3}}', 'near misses of prototype']
  ]
  for (const [body, what] of accepted) {
    t.equal(check(body), undefined, what)
    t.notOk(secureJsonRefuses(body), `${what}: secure-json-parse accepts it too`)
  }
})

t.test('escaped spellings of constructor and prototype are the words themselves', async t => {
  t.equal(check('{"constr\\u0075ctor":{"prototype":1}}'), CONSTRUCTOR)
  t.equal(check('{"constructor":{"prot\\u006ftype":1}}'), CONSTRUCTOR)
  t.equal(check('{"\\u0063onstructor":{"\\u0070rototype":1}}'), CONSTRUCTOR, 'both escaped')
  t.equal(check('{"constructor":{"prot\\u006Ftype":1}}'), CONSTRUCTOR, 'upper-case hex digits')
  t.equal(check('{"\\u0063\\u006f\\u006e\\u0073\\u0074\\u0072\\u0075\\u0063\\u0074\\u006f\\u0072":{"prototype":1}}'), CONSTRUCTOR, 'every character escaped')
  t.equal(check('{"constr\\u0075ctor":"Foo"}'), undefined, 'escaped constructor holding a string')
  t.equal(check('{"constr\\u0075ctor":{"name":"x"}}'), undefined, 'escaped constructor holding an object without prototype')
  t.equal(check('{"constr\\u0075ctor":5,"x":{"prot\\u006ftype":1}}'), undefined, 'escaped constructor, then escaped prototype in a sibling')
  t.equal(check('{"prot\\u006ftype":1}'), undefined, 'escaped prototype alone')
  t.equal(check('{"constr\\u0075ctor":1,"constructor":2}'), 'duplicate object key', 'escaped and plain constructor are one key')
  t.equal(check('{"constructor":{"prototype":1,"prot\\u006ftype":2}}'), CONSTRUCTOR, 'the first prototype already refuses')
})

t.test('constructor and prototype in large objects (a Set past 16 keys)', async t => {
  t.equal(check(`{"constructor":${wide(20, ',"prototype":1')}}`), CONSTRUCTOR, 'prototype after 20 keys of a constructor object')
  t.equal(check(`{"constructor":${wide(20, ',"prot\\u006ftype":1')}}`), CONSTRUCTOR, 'escaped prototype after 20 keys')
  t.equal(check(`{"constructor":${wide(20)}}`), undefined, 'a large constructor object without prototype')
  t.equal(check(wide(20, ',"constructor":{"prototype":1}')), CONSTRUCTOR, 'a constructor after 20 keys')
  t.equal(check(wide(20, ',"constr\\u0075ctor":{"prototype":1}')), CONSTRUCTOR, 'an escaped constructor after 20 keys')
  t.equal(check(wide(20, ',"constructor":"Foo","prototype":1')), undefined, 'constructor and prototype as ordinary keys of a large object')
  t.equal(check(wide(20, ',"constructor":5,"x":{"prototype":1}')), undefined, 'a number constructor, then prototype in a sibling')
  t.equal(check(wide(20, `,"constructor":${wide(20)},"x":{"prototype":1}`)), undefined, 'two large objects, prototype in neither constructor')
  t.equal(check(wide(20, ',"constructor":1,"constructor":2')), 'duplicate object key', 'a repeated constructor in a large object')
  t.equal(check(`{"constructor":${wide(20, ',"k3":0')}}`), 'duplicate object key', 'a duplicate in a large constructor object')
})

t.test('the same key in sibling and nested objects is not a duplicate', async t => {
  t.equal(check('{"a":{"a":{"a":1}},"b":[{"a":1},{"a":2}]}'), undefined)
  t.equal(check(`{"outer":${wide(20)},"next":${wide(20)}}`), undefined, 'two large siblings')
  t.equal(check(`[${wide(20)},{"k0":1,"k0":2}]`), 'duplicate object key', 'a small object after a large one')
  t.equal(check(`{"k0":${wide(20)},"k0":1}`), 'duplicate object key', 'the outer key repeats after a large inner object')
})

t.test('nothing carries over from one scan to the next', async t => {
  t.equal(check('{"a":{"b":{"__proto__":1'), PROTO, 'a scan that stops inside open objects')
  t.equal(check('{"a":1,"b":2}'), undefined, 'the next body starts from nothing')
  t.equal(check(wide(20, ',"k1":0')), 'duplicate object key')
  t.equal(check(wide(20)), undefined)
  t.equal(check('{"a":[{"x":1}'), undefined, 'unterminated bodies are left to JSON.parse')
  t.equal(check('{"a":1}'), undefined)

  t.equal(check('{"constructor":{"prototype":1}}'), CONSTRUCTOR, 'refused inside a constructor object')
  t.equal(check('{"prototype":1}'), undefined, 'the next top-level object is no constructor object')
  t.equal(check('{"x":{"constructor":{"a":1,"a":2}}}'), 'duplicate object key', 'refused with a constructor object open at depth 3')
  t.equal(check('{"x":{"y":{"prototype":1}}}'), undefined, 'an ordinary object at depth 3 afterwards')
  t.equal(check('{"a":{"constructor":'), undefined, 'a body that ends right after a constructor key')
  t.equal(check('{"prototype":1}'), undefined, 'the next body: no constructor value pending')
  t.equal(check('[{"constructor":'), undefined)
  t.equal(check('{"b":{"prototype":1}}'), undefined)
  t.equal(check(`{"constructor":${wide(20, ',"prototype":1')}}`), CONSTRUCTOR, 'refused in a large constructor object')
  t.equal(check(`{"z":${wide(20, ',"prototype":1')}}`), undefined, 'a large ordinary object at the same depth afterwards')
})

/** One member key of a generated body: its text, and which of its characters to escape (and how). */
interface GeneratedKey {
  word: string
  spelling: number
}

const SPECIAL_WORDS = ['constructor', 'prototype', '__proto__', 'name', 'a']

/** `key` as JSON text, with characters escaped as \\u00XX where the bits of its spelling say (hex in either case). */
function spell ({ word, spelling }: GeneratedKey): string {
  let text = '"'
  for (let i = 0; i < word.length; i++) {
    const bits = (spelling >>> (2 * (i % 15))) & 3
    const hex = word.charCodeAt(i).toString(16).padStart(4, '0')
    text += bits === 0 || bits === 1 ? word[i] : `\\u${bits === 2 ? hex : hex.toUpperCase()}`
  }
  return `${text}"`
}

t.test('generated bodies: refused exactly when secure-json-parse refuses them', async t => {
  const key = fc.record({
    word: fc.constantFrom(...SPECIAL_WORDS),
    spelling: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 0x3fffffff }))
  })
  const leaf = fc.constantFrom('1', '-2.5e3', '"s"', 'null', 'true', 'false', '"prototype"', '"constructor"', '"__proto__"', '{}', '[]')
  const { value } = fc.letrec<{ value: string, array: string, object: string }>(tie => ({
    value: fc.oneof({ depthSize: 'small', maxDepth: 6 }, leaf, tie('array'), tie('object')),
    array: fc.array(tie('value'), { maxLength: 3 }).map(items => `[${items.join(',')}]`),
    object: fc.tuple(
      fc.uniqueArray(fc.tuple(key, tie('value')), { maxLength: 4, selector: ([k]) => k.word }),
      fc.constantFrom(0, 0, 0, 20)
    ).map(([members, padding]) => {
      const all = Array.from({ length: padding }, (_, i) => `"pad${i}":${i}`)
      for (const [k, v] of members) all.push(`${spell(k)}:${v}`)
      return `{${all.join(',')}}`
    })
  }))
  let refusals = 0
  fc.assert(fc.property(value, body => {
    const violation = check(body)
    if (violation !== undefined) refusals++
    if (violation !== undefined && violation !== PROTO && violation !== CONSTRUCTOR) throw new Error(`unexpected refusal: ${violation}`)
    return (violation !== undefined) === secureJsonRefuses(body)
  }), { numRuns: 3000 })
  t.ok(refusals > 100, `${refusals} of 3000 generated bodies were refused (both ways exercised)`)
})

t.test('depth and value limits (values: containers and members, the array itself included)', async t => {
  t.equal(check('['.repeat(64) + ']'.repeat(64)), undefined)
  t.equal(check('['.repeat(65) + ']'.repeat(65)), 'nesting deeper than 64')
  t.equal(jsonStructureViolation(`[${Array(11).fill(0).join(',')}]`, { maxDepth: 4, maxValues: 10 }), 'more than 10 values')
  t.equal(jsonStructureViolation(`[${Array(10).fill(0).join(',')}]`, { maxDepth: 4, maxValues: 10 }), undefined)
})
