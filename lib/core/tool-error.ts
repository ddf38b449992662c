/** Thrown by a tool to report a failure to the model as an `isError: true` result (not a protocol error). */
export class ToolError extends Error {
  constructor (message: string) {
    super(message)
    this.name = 'ToolError'
  }
}

/**
 * A `ToolError` (or a subclass) by class or by name: a tool module in a worker thread may load its own
 * copy of the class. (Errors do not cross threads as themselves: a worker answers them as results.)
 */
export function isToolError (error: unknown): error is Error {
  return error instanceof ToolError || (error instanceof Error && (error.name === 'ToolError' || error.name === 'ClientInputError'))
}

/** The `isError` result a tool failure is answered with: the model reads `message`. */
export function toolErrorResult (message: string): { content: Array<{ type: 'text', text: string }>, isError: true } {
  return { content: [{ type: 'text', text: message }], isError: true }
}
