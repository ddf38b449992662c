/**
 * Worker tools that report what their context showed them in a file (a cancelled request gets no
 * result, so the test cannot read it from the response).
 */
import { writeFileSync } from 'node:fs'
import { RequestCancelledError, type WorkerContext } from '../../lib/index.js'

export interface ContextReport {
  how: 'signal' | 'throwIfCancelled'
  requestId: string | number
  principal: string | null
  era: string
  isRequestCancelledError: boolean
  name: string | undefined
  reason: string | null | undefined
  source: string | undefined
  /** `ctx.cancelled()` when the cancellation was seen. */
  cancelledBefore: boolean
}

function report (file: string, how: ContextReport['how'], ctx: WorkerContext, error: unknown, cancelledBefore: boolean): void {
  const cancellation = error as Partial<RequestCancelledError>
  writeFileSync(file, JSON.stringify({
    how,
    requestId: ctx.requestId,
    principal: ctx.principal?.id ?? null,
    era: ctx.era,
    isRequestCancelledError: error instanceof RequestCancelledError,
    name: cancellation.name,
    reason: cancellation.reason,
    source: cancellation.source,
    cancelledBefore
  } satisfies ContextReport))
}

/** Answers at once: a first call loads this module in the pool's thread. */
export function ping (): { content: Array<{ type: 'text', text: string }> } {
  return { content: [{ type: 'text', text: 'pong' }] }
}

/**
 * Waits on `ctx.signal`, reporting the abort reason it gets. `<file>.waiting` tells the test it waits
 * (a signal read after the cancellation is born aborted, and fires no event).
 */
export async function awaitSignal ({ file }: { file: string }, ctx: WorkerContext): Promise<never> {
  return await new Promise<never>((_resolve, reject) => {
    ctx.signal.addEventListener('abort', () => {
      report(file, 'signal', ctx, ctx.signal.reason, ctx.cancelled())
      reject(ctx.signal.reason)
    }, { once: true })
    writeFileSync(`${file}.waiting`, '')
  })
}

/** A loop that never yields, polling `ctx.throwIfCancelled()`: only shared memory can reach it. `<file>.running` tells the test it loops. */
export function busyPoll ({ file }: { file: string }, ctx: WorkerContext): never {
  writeFileSync(`${file}.running`, '')
  for (;;) {
    try {
      ctx.throwIfCancelled()
    } catch (error) {
      report(file, 'throwIfCancelled', ctx, error, ctx.cancelled())
      throw error
    }
  }
}

/** SSE polling from a worker thread: closes the response's connection at once, then answers 100 ms later. */
export async function closesStream (_args: unknown, ctx: WorkerContext): Promise<{ content: Array<{ type: 'text', text: string }> }> {
  ctx.closeStream()
  await new Promise(resolve => setTimeout(resolve, 100))
  return { content: [{ type: 'text', text: 'answered after the stream closed' }] }
}
