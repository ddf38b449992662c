/** Small readers for MCP results, shared by the client end-to-end tests. */

export interface Outcome<T> {
  value: T | undefined
  error: unknown
}

/** Settles a client call into value-or-error, so a rejection can be reported with the wire traffic behind it. */
export async function attempt<T> (promise: Promise<T>): Promise<Outcome<T>> {
  try {
    return { value: await promise, error: undefined }
  } catch (error) {
    return { value: undefined, error }
  }
}

export function describeError (error: unknown): string | undefined {
  if (error === undefined) return undefined
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error)
}

/** The text of every `text` content item, in order. */
export function texts (content: unknown): string[] {
  return (Array.isArray(content) ? content as unknown[] : []).flatMap(item => {
    const { type, text } = (item ?? {}) as { type?: unknown, text?: unknown }
    return type === 'text' && typeof text === 'string' ? [text] : []
  })
}

/** True when each number is greater than the one before it. */
export function strictlyIncreasing (values: readonly number[]): boolean {
  return values.every((value, i) => i === 0 || value > values[i - 1]!)
}
