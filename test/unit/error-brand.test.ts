/**
 * The runtime errors match across copies of the package: a worker tool's module, or an application
 * that ends up with two installed copies, may throw a `ToolError` of another copy, and the plugin must
 * still answer it as an `isError` result (and see a `RequestCancelledError` as a cancellation).
 */
import t from 'tap'
import * as errors from '../../lib/core/errors.js'

/** A second instance of the module: another URL is another module, with classes of its own. */
const copy = await import(new URL('../../lib/core/errors.ts?copy', import.meta.url).href) as typeof errors

t.test('the copy has classes of its own', async t => {
  t.not(copy.ToolError, errors.ToolError)
})

t.test('each runtime error of one copy is an instance of the same class of the other', async t => {
  t.ok(new copy.ToolError('x') instanceof errors.ToolError, 'ToolError')
  t.ok(new copy.ClientInputError('timeout', 'x') instanceof errors.ClientInputError, 'ClientInputError')
  t.ok(new copy.ClientInputError('timeout', 'x') instanceof errors.ToolError, 'a ClientInputError is a ToolError')
  t.ok(new copy.RequestCancelledError(null, 'client') instanceof errors.RequestCancelledError, 'RequestCancelledError')
  t.ok(new copy.HandlerKilledError(5) instanceof errors.HandlerKilledError, 'HandlerKilledError')
  t.ok(new copy.InputRequired({}) instanceof errors.InputRequired, 'InputRequired')
  t.ok(new errors.ToolError('x') instanceof copy.ToolError, 'and the other way round')
})

t.test('and nothing else is', async t => {
  t.notOk(new errors.ToolError('x') instanceof errors.ClientInputError, 'a ToolError is no ClientInputError')
  t.notOk(new Error('x') instanceof errors.ToolError, 'a plain Error')
  const lookalike = Object.assign(new Error('x'), { name: 'ToolError' })
  t.notOk(lookalike instanceof errors.ToolError, 'an Error merely named ToolError')
  t.notOk(new errors.RequestCancelledError(null, 'client') instanceof errors.ToolError, 'a cancellation is no tool failure')
  t.notOk((null as unknown as object) instanceof errors.ToolError, 'null')
})

t.test('an application\'s subclass keeps the ordinary instanceof', async t => {
  class QuotaError extends errors.ToolError {}
  t.ok(new QuotaError('over') instanceof QuotaError)
  t.ok(new QuotaError('over') instanceof errors.ToolError, 'and is a ToolError')
  t.notOk(new errors.ToolError('x') instanceof QuotaError, 'a plain ToolError is not one')
})
