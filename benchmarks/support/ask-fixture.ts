/** What servers/plugin-ask.ts serves and ask-latency.ts expects of it, in one place. */

/** The plugin's `secret` option: 32 bytes or more; fixed, so a run is reproducible. */
export const ASK_SECRET = 'bench-ask-latency-secret-0123456789abcdef'

/** The parameters of the `elicitation/create` request the `ask` tool sends, exactly. */
export const ASK_ELICITATION = {
  message: 'Your name?',
  requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] }
}

/** The text `ask` returns for its `text` argument and an accepted answer's `name`. */
export const askText = (text: string, name: string): string => `${text}:${name}`
