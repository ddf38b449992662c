import { ToolError } from './tool-error.js'

export type ClientInputFailure = 'unavailable' | 'timeout' | 'refused' | 'invalid'

/**
 * An ask that got no usable answer: the response cannot carry a request (`unavailable`), the client
 * did not answer in time (`timeout`), it answered with a JSON-RPC error (`refused`), or its answer
 * breaks what the specification requires of the result or the elicitation's `requestedSchema`
 * (`invalid`). A tool that lets it through returns an `isError` result with its message; a prompt or
 * resource read fails with -32603.
 */
export class ClientInputError extends ToolError {
  readonly failure: ClientInputFailure

  constructor (failure: ClientInputFailure, message: string) {
    super(message)
    this.name = 'ClientInputError'
    this.failure = failure
  }
}
