/** Worker tools that ask the client: the same ask API an in-process tool has, across the thread boundary. */
import { ClientInputError, ToolError, type WorkerContext } from '../../lib/index.js'

type Result = { content: Array<{ type: 'text', text: string }> }
const text = (value: string): Result => ({ content: [{ type: 'text', text: value }] })

/** Asks the user's name; in 2026-07-28, counts its rounds in `ctx.state`. */
export async function greet (_args: unknown, ctx: WorkerContext): Promise<Result> {
  const rounds = typeof ctx.state === 'number' ? ctx.state + 1 : 1
  ctx.state = rounds
  const answer = await ctx.elicit({ message: 'Your name?', requestedSchema: { type: 'object', properties: { name: { type: 'string' } } } })
  return text(`Hello, ${String(answer.content?.name)} (round ${rounds}, supports elicitation: ${String(ctx.supports('elicitation'))})`)
}

/** Asks the roots and survives a client that does not answer: the ClientInputError arrives as itself. */
export async function patient (_args: unknown, ctx: WorkerContext): Promise<Result> {
  try {
    const roots = await ctx.roots()
    return text(`roots: ${roots.map(root => root.uri).join(', ')}`)
  } catch (error) {
    return text(`no roots: ${error instanceof ClientInputError ? error.failure : 'other'}`)
  }
}

/** A ToolError thrown in a worker thread is an isError result, as in process. */
export function refuse (): never {
  throw new ToolError('refused in a worker')
}
