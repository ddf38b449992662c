/**
 * The worker pool's slots (lib/server/fair-queue.ts): handed out one scope at a time, round robin, so a
 * scope's backlog never holds up another scope's next job by more than one job; a job cancelled while
 * it waits never gets a slot; closing rejects whoever still waits.
 */
import t from 'tap'
import { FairQueue } from '../../lib/server/fair-queue.js'

/** Jobs that take a slot, record when they got it, and hold it until the test ends them. */
function jobs (queue: FairQueue): { start: (scope: string, name: string, signal?: AbortSignal) => Promise<void>, order: string[], end: () => Promise<void> } {
  const order: string[] = []
  return {
    order,
    start: async (scope, name, signal) => {
      await queue.acquire(scope, signal)
      order.push(name)
    },
    // A slot given back, then the microtasks it resolves run.
    end: async () => {
      queue.release()
      await new Promise(resolve => setImmediate(resolve))
    }
  }
}

t.test('a free slot is taken at once, without a promise', async t => {
  const queue = new FairQueue(2)
  t.equal(queue.acquire('a'), undefined)
  t.equal(queue.acquire('b'), undefined)
  const third = queue.acquire('a')
  t.type(third, Promise, 'a third job waits')
  queue.close(new Error('closed'))
  await t.rejects(third!, /closed/)
})

t.test('waiting jobs are served one scope at a time, in the order the scopes first waited', async t => {
  const queue = new FairQueue(1)
  const { start, order, end } = jobs(queue)
  t.equal(queue.acquire('busy'), undefined, 'the one slot is taken at once')
  const started = [...['a1', 'a2', 'a3', 'a4'].map(async name => await start('a', name)), start('b', 'b1'), start('b', 'b2'), start('c', 'c1')]
  for (let i = 0; i < 7; i++) await end()
  await Promise.all(started)
  t.same(order, ['a1', 'b1', 'c1', 'a2', 'b2', 'a3', 'a4'], "A's backlog of four delays B's first job by one job, not four")
})

t.test('a scope that arrives later joins the round at its end: one job of each scope already waiting goes first', async t => {
  const queue = new FairQueue(1)
  const { start, order, end } = jobs(queue)
  t.equal(queue.acquire('busy'), undefined, 'the one slot is taken at once')
  const early = ['a1', 'a2', 'a3'].map(async name => await start('a', name))
  await end()
  const late = start('b', 'b1')
  await end()
  await end()
  await end()
  await Promise.all([...early, late])
  t.same(order, ['a1', 'a2', 'b1', 'a3'])
})

t.test('a job cancelled while it waits gives up its place and never gets a slot', async t => {
  const queue = new FairQueue(1)
  const { start, order, end } = jobs(queue)
  t.equal(queue.acquire('busy'), undefined, 'the one slot is taken at once')
  const cancel = new AbortController()
  const doomed = start('a', 'a1', cancel.signal)
  const next = start('b', 'b1')
  const reason = new Error('cancelled by the client')
  cancel.abort(reason)
  await t.rejects(doomed, reason, 'it rejects with the signal\'s reason')
  await end()
  await next
  t.same(order, ['b1'], 'the next scope gets the slot')
  await end()
  t.equal(queue.acquire('c'), undefined, 'once b1 ends the slot is free: the cancelled job left no place behind')
})

t.test('a job whose signal is already aborted does not wait', async t => {
  const queue = new FairQueue(1)
  t.equal(queue.acquire('busy'), undefined, 'the one slot is taken at once')
  const reason = new Error('gone')
  t.throws(() => queue.acquire('a', AbortSignal.abort(reason)), reason)
})

t.test('close rejects every waiting job; their signals no longer matter', async t => {
  const queue = new FairQueue(1)
  t.equal(queue.acquire('busy'), undefined, 'the one slot is taken at once')
  const cancel = new AbortController()
  const waiting = [queue.acquire('a', cancel.signal), queue.acquire('b')]
  queue.close(new Error('The worker pool is closed'))
  for (const job of waiting) await t.rejects(job!, /closed/)
  cancel.abort()
})
