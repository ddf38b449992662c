/**
 * The JSON structure guard (DESIGN §5 Limits) on its own: duplicate and forbidden keys however they
 * are spelled, in small objects (compared in place) and large ones (a Set past 16 keys), and the
 * scan's shared state never leaking from one body into the next. The HTTP answers to the same bodies
 * are in hostile-input.test.ts.
 */
import t from 'tap'
import { jsonStructureViolation } from '../lib/protocol/json-guard.js'

const LIMITS = { maxDepth: 64, maxValues: 10_000 }
const check = (text: string): string | undefined => jsonStructureViolation(text, LIMITS)
/** An object literal with keys k0…k(n-1), then `extra` members. */
const wide = (n: number, extra = ''): string => `{${Array.from({ length: n }, (_, i) => `"k${i}":${i}`).join(',')}${extra}}`

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

t.test('forbidden keys are refused in any spelling and at any depth', async t => {
  t.equal(check('{"__proto__":{}}'), 'forbidden key "__proto__"')
  t.equal(check('{"a":{"b":[{"constructor":1}]}}'), 'forbidden key "constructor"')
  t.equal(check('{"\\u005f_proto__":{}}'), 'forbidden key "__proto__"')
  t.equal(check(wide(30, ',"\\u0063onstructor":1')), 'forbidden key "constructor"', 'in a large object')
  t.equal(check('{"__proto":1,"constructors":2,"x":"__proto__"}'), undefined, 'near misses, and the words as values')
})

t.test('the same key in sibling and nested objects is not a duplicate', async t => {
  t.equal(check('{"a":{"a":{"a":1}},"b":[{"a":1},{"a":2}]}'), undefined)
  t.equal(check(`{"outer":${wide(20)},"next":${wide(20)}}`), undefined, 'two large siblings')
  t.equal(check(`[${wide(20)},{"k0":1,"k0":2}]`), 'duplicate object key', 'a small object after a large one')
  t.equal(check(`{"k0":${wide(20)},"k0":1}`), 'duplicate object key', 'the outer key repeats after a large inner object')
})

t.test('nothing carries over from one scan to the next', async t => {
  t.equal(check('{"a":{"b":{"__proto__":1'), 'forbidden key "__proto__"', 'a scan that stops inside open objects')
  t.equal(check('{"a":1,"b":2}'), undefined, 'the next body starts from nothing')
  t.equal(check(wide(20, ',"k1":0')), 'duplicate object key')
  t.equal(check(wide(20)), undefined)
  t.equal(check('{"a":[{"x":1}'), undefined, 'unterminated bodies are left to JSON.parse')
  t.equal(check('{"a":1}'), undefined)
})

t.test('depth and value limits (values: containers and members, the array itself included)', async t => {
  t.equal(check('['.repeat(64) + ']'.repeat(64)), undefined)
  t.equal(check('['.repeat(65) + ']'.repeat(65)), 'nesting deeper than 64')
  t.equal(jsonStructureViolation(`[${Array(11).fill(0).join(',')}]`, { maxDepth: 4, maxValues: 10 }), 'more than 10 values')
  t.equal(jsonStructureViolation(`[${Array(10).fill(0).join(',')}]`, { maxDepth: 4, maxValues: 10 }), undefined)
})
