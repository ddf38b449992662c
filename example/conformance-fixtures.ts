/**
 * The fixtures the MCP conformance suite calls by name (`@modelcontextprotocol/conformance`, see
 * reference/conformance.md §4), registered by the demo only with `MCP_CONFORMANCE=1` (example/app.ts).
 * Asking the client is one API in both eras: in the legacy era
 * (`test_sampling`, `test_elicitation*`) `ctx.sample` and `ctx.elicit` send a request on the response's
 * SSE stream and wait for the client's answer POST; in the 2026-07-28 era the same questions travel as
 * multi-round-trip requests (SEP-2322): the `test_input_required_result_*` fixtures ask through
 * `ctx.input`, `ctx.elicit`, `ctx.sample` and `ctx.roots`, and the round ends with an `input_required`
 * result until the client's retry carries the answers.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance } from 'fastify'
import { elicitation, rootsList, sampling, type DefinitionHandle, type HandlerContext, type InputRequest } from '../lib/index.js'

const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=='
const WAV = 'UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA='

const text = (value: string) => ({ content: [{ type: 'text', text: value }] })
/** The text of a sampled message (or its JSON when it is not text). */
const sampledText = (content: unknown): string => {
  const block = Array.isArray(content) ? content[0] : content
  return typeof block?.text === 'string' ? block.text : JSON.stringify(content)
}
const askGreeting = () => sampling({ messages: [{ role: 'user', content: { type: 'text', text: 'Generate a greeting' } }], maxTokens: 50 })
/** What the legacy elicitation fixtures answer: the action and content the client sent. */
const elicitationCompleted = (answer: { action: string, content?: unknown }) =>
  text(`Elicitation completed: action=${answer.action}, content=${JSON.stringify(answer.content ?? {})}`)

/** SEP-1034: a default value for every primitive type. */
const DEFAULTS_SCHEMA = {
  type: 'object',
  properties: {
    name: { type: 'string', description: 'Your name', default: 'John Doe' },
    age: { type: 'integer', description: 'Your age', default: 30 },
    score: { type: 'number', description: 'Your score', default: 95.5 },
    status: { type: 'string', description: 'Your status', enum: ['active', 'inactive', 'pending'], default: 'active' },
    verified: { type: 'boolean', description: 'Verified', default: true }
  }
}
/** SEP-1330: the five enum shapes. */
const ENUMS_SCHEMA = {
  type: 'object',
  properties: {
    untitledSingle: { type: 'string', enum: ['option1', 'option2', 'option3'] },
    titledSingle: {
      type: 'string',
      oneOf: [{ const: 'value1', title: 'First Option' }, { const: 'value2', title: 'Second Option' }, { const: 'value3', title: 'Third Option' }]
    },
    legacyEnum: { type: 'string', enum: ['opt1', 'opt2', 'opt3'], enumNames: ['Option One', 'Option Two', 'Option Three'] },
    untitledMulti: { type: 'array', items: { type: 'string', enum: ['option1', 'option2', 'option3'] } },
    titledMulti: {
      type: 'array',
      items: { anyOf: [{ const: 'value1', title: 'First Choice' }, { const: 'value2', title: 'Second Choice' }, { const: 'value3', title: 'Third Choice' }] }
    }
  }
}

/** The form-mode schema of an answer with one required string property. */
const oneString = (property: string) => ({ type: 'object', properties: { [property]: { type: 'string' } }, required: [property] })
const askString = (message: string, property: string) => elicitation({ message, requestedSchema: oneString(property) })
const askName = () => askString('What is your name?', 'name')
const askConfirmation = () => elicitation({
  message: 'Please confirm',
  requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] }
})
const askConfirm = (message: string) => elicitation({
  message,
  requestedSchema: { type: 'object', properties: { confirm: { type: 'boolean' } }, required: ['confirm'] }
})
const askConfirmDelete = (filename: string) => askConfirm(`Delete ${filename}?`)
/** One question of each kind, under the keys the multiple-input scenario describes. */
const oneOfEachKind = (): Record<'user_name' | 'greeting' | 'client_roots', InputRequest> => ({
  user_name: askName(),
  greeting: askGreeting(),
  client_roots: rootsList()
})
/** A string field of an accepted elicitation, or a placeholder for a declined or cancelled one. */
const accepted = (answer: { action: string, content?: Record<string, unknown> }, field: string): string =>
  answer.action === 'accept' ? String(answer.content?.[field]) : `(${answer.action})`

export function registerConformanceFixtures (app: FastifyInstance): void {
  const { mcp } = app

  mcp.tool({
    name: 'test_simple_text',
    description: 'Returns a simple text response',
    inputSchema: { type: 'object', properties: {} },
    handler: () => text('This is a simple text response for testing.')
  })
  mcp.tool({
    name: 'test_image_content',
    description: 'Returns an image',
    handler: () => ({ content: [{ type: 'image', data: PNG, mimeType: 'image/png' }] })
  })
  mcp.tool({
    name: 'test_audio_content',
    description: 'Returns audio',
    handler: () => ({ content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }] })
  })
  mcp.tool({
    name: 'test_embedded_resource',
    description: 'Returns an embedded resource',
    handler: () => ({
      content: [{ type: 'resource', resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' } }]
    })
  })
  mcp.tool({
    name: 'test_multiple_content_types',
    description: 'Returns text, an image and a resource',
    handler: () => ({
      content: [
        { type: 'text', text: 'Multiple content types test:' },
        { type: 'image', data: PNG, mimeType: 'image/png' },
        { type: 'resource', resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: '{"test":"data","value":123}' } }
      ]
    })
  })
  mcp.tool({
    name: 'test_tool_with_logging',
    description: 'Sends three log messages while running',
    handler: async (_args, ctx) => {
      for (const [i, message] of ['Tool execution started', 'Tool processing data', 'Tool execution completed'].entries()) {
        if (i > 0) await sleep(50, undefined, { signal: ctx.signal })
        await ctx.notify('info', message)
      }
      return text('Tool with logging executed successfully')
    }
  })
  mcp.tool({
    name: 'test_logging_tool',
    description: 'Sends log messages; only requests that set a log level receive them',
    handler: async (_args, ctx) => {
      await ctx.notify('info', 'logging tool ran')
      await ctx.notify('error', 'logging tool error-level message')
      return text('logged')
    }
  })
  mcp.tool({
    name: 'test_error_handling',
    description: 'Always fails with an isError result',
    handler: () => ({ ...text('This tool intentionally returns an error for testing'), isError: true })
  })
  mcp.tool({
    name: 'test_tool_with_progress',
    description: 'Reports progress 0, 50 and 100 of 100',
    handler: async (_args, ctx) => {
      for (const progress of [0, 50, 100]) {
        if (progress > 0) await sleep(50, undefined, { signal: ctx.signal })
        await ctx.progress(progress, 100)
      }
      return text('Progress complete')
    }
  })
  mcp.tool({
    name: 'test_reconnection',
    description: 'Closes its response stream after the priming event (SSE polling), then answers on the resumed stream',
    handler: async (_args, ctx) => {
      ctx.closeStream()
      await sleep(100, undefined, { signal: ctx.signal })
      return text('Reconnection test completed')
    }
  })
  mcp.tool({
    name: 'test_missing_capability',
    description: 'Needs the client sampling capability; rejected with -32021 when the client did not declare it',
    requiredClientCapabilities: { sampling: {} },
    handler: async (_args, ctx) => text(sampledText((await ctx.input({ greeting: askGreeting() })).greeting.content))
  })
  mcp.tool({
    name: 'test_streaming_elicitation',
    description: 'Streams a notification, then asks (2026-07-28: an input_required result, never an independent request)',
    handler: async (_args, ctx) => {
      await ctx.notify('info', 'about to ask for your name')
      const { name } = await ctx.input({ name: askName() })
      return text(`Hello, ${accepted(name, 'name')}`)
    }
  })
  // Legacy era: requests to the client on the response's SSE stream, answered by a POST to any node.
  mcp.tool({
    name: 'test_sampling',
    description: 'Asks the client to sample an LLM with the given prompt',
    inputSchema: { type: 'object', properties: { prompt: { type: 'string' } }, required: ['prompt'] },
    handler: async ({ prompt }, ctx) => {
      const answer = await ctx.sample({ messages: [{ role: 'user', content: { type: 'text', text: String(prompt) } }], maxTokens: 100 })
      return text(`LLM response: ${sampledText(answer.content)}`)
    }
  })
  mcp.tool({
    name: 'test_elicitation',
    description: 'Asks the user for a username and an email address',
    inputSchema: { type: 'object', properties: { message: { type: 'string' } }, required: ['message'] },
    handler: async ({ message }, ctx) => {
      const answer = await ctx.elicit({
        message: String(message),
        requestedSchema: {
          type: 'object',
          properties: {
            username: { type: 'string', description: 'Your username' },
            email: { type: 'string', description: 'Your email address', format: 'email' }
          },
          required: ['username', 'email']
        }
      })
      return text(`User response: action=${answer.action}, content=${JSON.stringify(answer.content ?? {})}`)
    }
  })
  mcp.tool({
    name: 'test_elicitation_sep1034_defaults',
    description: 'Elicitation with a default value for every primitive type (SEP-1034)',
    handler: async (_args, ctx) => elicitationCompleted(await ctx.elicit({ message: 'Please review and update the form fields with defaults', requestedSchema: DEFAULTS_SCHEMA }))
  })
  mcp.tool({
    name: 'test_elicitation_sep1330_enums',
    description: 'Elicitation with the five enum schema shapes (SEP-1330)',
    handler: async (_args, ctx) => elicitationCompleted(await ctx.elicit({ message: 'Please select options from the enum fields', requestedSchema: ENUMS_SCHEMA }))
  })
  // 2026-07-28 multi-round-trip requests (SEP-2322). The handler runs again on every round, and an ask
  // whose answer the retry does not carry yet ends the round with `input_required`.
  mcp.tool({
    name: 'test_input_required_result_elicitation',
    description: 'Asks the user\'s name (key user_name), then greets them',
    handler: async (_args, ctx) => {
      const { user_name: answer } = await ctx.input({ user_name: askName() })
      return text(`Hello, ${accepted(answer, 'name')}!`)
    }
  })
  mcp.tool({
    name: 'test_input_required_result_sampling',
    description: 'Asks the client\'s model a question, then returns its answer',
    handler: async (_args, ctx) => {
      const answer = await ctx.sample({
        messages: [{ role: 'user', content: { type: 'text', text: 'What is the capital of France?' } }],
        maxTokens: 100
      })
      return text(`The model said: ${JSON.stringify(answer.content)}`)
    }
  })
  mcp.tool({
    name: 'test_input_required_result_list_roots',
    description: 'Asks the client\'s roots, then lists them',
    handler: async (_args, ctx) => {
      const roots = await ctx.roots()
      return text(`Roots: ${roots.map(root => root.uri).join(', ') || '(none)'}`)
    }
  })
  for (const name of ['test_input_required_result_request_state', 'test_input_required_result_tampered_state']) {
    mcp.tool({
      name,
      description: 'Asks for a confirmation; ctx.state, sealed in requestState, proves the retry continues this round',
      handler: async (_args, ctx) => {
        const carried = ctx.state !== undefined
        ctx.state ??= { asked: 'confirm' }
        const { confirm } = await ctx.input({ confirm: askConfirmation() })
        return text(`${carried ? 'state-ok' : 'state-missing'}: confirmed ${accepted(confirm, 'ok')}`)
      }
    })
  }
  mcp.tool({
    name: 'test_input_required_result_multiple_inputs',
    description: 'Asks an elicitation, a sampling and the roots in one round',
    handler: async (_args, ctx) => {
      const answers = await ctx.input(oneOfEachKind())
      return text(`Received ${Object.keys(answers).join(', ')}`)
    }
  })
  mcp.tool({
    name: 'test_input_required_result_capabilities',
    description: 'Asks only what the client declared (elicitation, sampling, roots)',
    handler: async (_args, ctx) => {
      const kinds = oneOfEachKind()
      const asks: Record<string, InputRequest> = {}
      if (ctx.supports('elicitation')) asks.user_name = kinds.user_name
      if (ctx.supports('sampling')) asks.greeting = kinds.greeting
      if (ctx.supports('roots')) asks.client_roots = kinds.client_roots
      if (Object.keys(asks).length === 0) return text('The client declared nothing to ask')
      const answers = await ctx.input(asks)
      return text(`Received ${Object.keys(answers).join(', ')}`)
    }
  })
  mcp.tool({
    name: 'test_input_required_result_multi_round',
    description: 'Asks a name, then (in a second round) a favourite colour',
    handler: async (_args, ctx) => {
      const { step1 } = await ctx.input({ step1: askString('Step 1: What is your name?', 'name') })
      const { step2 } = await ctx.input({ step2: askString('Step 2: What is your favorite color?', 'color') })
      return text(`${accepted(step1, 'name')} likes ${accepted(step2, 'color')}`)
    }
  })

  mcp.tool({
    name: 'json_schema_2020_12_tool',
    description: 'Tool with JSON Schema 2020-12 features ($defs, $ref, additionalProperties)',
    inputSchema: {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      $defs: { address: { $anchor: 'address', type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } } },
      properties: { name: { type: 'string' }, address: { $ref: '#/$defs/address' } },
      allOf: [{ anyOf: [{ required: ['name'] }, { required: ['address'] }] }],
      if: { required: ['address'] },
      then: { properties: { address: { required: ['city'] } } },
      else: { properties: { name: { minLength: 1 } } },
      additionalProperties: false
    },
    handler: (args) => text(`Received ${JSON.stringify(args)}`)
  })

  mcp.tool({
    name: 'test_custom_headers',
    description: 'Mirrors region and priority into Mcp-Param-* headers (SEP-2243)',
    inputSchema: {
      type: 'object',
      properties: {
        region: { type: 'string', 'x-mcp-header': 'Region' },
        priority: { type: 'integer', 'x-mcp-header': 'Priority' },
        verbose: { type: 'boolean', 'x-mcp-header': 'Verbose' },
        query: { type: 'string' }
      },
      required: ['region', 'priority', 'query']
    },
    handler: (args) => text(`headers matched ${JSON.stringify(args)}`)
  })

  mcp.resource({
    uri: 'test://static-text',
    name: 'Static text resource',
    mimeType: 'text/plain',
    handler: uri => ({ contents: [{ uri, mimeType: 'text/plain', text: 'This is the content of the static text resource.' }] })
  })
  mcp.resource({
    uri: 'test://static-binary',
    name: 'Static binary resource',
    mimeType: 'image/png',
    handler: uri => ({ contents: [{ uri, mimeType: 'image/png', blob: PNG }] })
  })
  mcp.resource({
    uri: 'test://watched-resource',
    name: 'Watched resource',
    mimeType: 'text/plain',
    handler: uri => ({ contents: [{ uri, mimeType: 'text/plain', text: 'Watched resource content' }] })
  })
  mcp.resourceTemplate({
    uriTemplate: 'test://template/{id}/data',
    name: 'Template resource',
    mimeType: 'application/json',
    handler: (uri, { id }) => ({
      contents: [{ uri, mimeType: 'application/json', text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) }]
    })
  })

  mcp.prompt({
    name: 'test_simple_prompt',
    description: 'A simple prompt without arguments',
    handler: () => ({ messages: [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt for testing.' } }] })
  })
  mcp.prompt({
    name: 'test_prompt_with_arguments',
    description: 'A prompt with two required arguments',
    arguments: [
      { name: 'arg1', description: 'First test argument', required: true },
      { name: 'arg2', description: 'Second test argument', required: true }
    ],
    handler: ({ arg1, arg2 }) => ({
      messages: [{ role: 'user', content: { type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` } }]
    })
  })
  mcp.prompt({
    name: 'test_prompt_with_embedded_resource',
    description: 'A prompt that embeds a resource',
    arguments: [{ name: 'resourceUri', description: 'URI of the resource to embed', required: true }],
    handler: ({ resourceUri }) => ({
      messages: [
        { role: 'user', content: { type: 'resource', resource: { uri: resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' } } },
        { role: 'user', content: { type: 'text', text: 'Please process the embedded resource above.' } }
      ]
    })
  })
  mcp.prompt({
    name: 'test_prompt_with_image',
    description: 'A prompt with an image',
    handler: () => ({
      messages: [
        { role: 'user', content: { type: 'image', data: PNG, mimeType: 'image/png' } },
        { role: 'user', content: { type: 'text', text: 'Please analyze the image above.' } }
      ]
    })
  })
  mcp.prompt({
    name: 'test_input_required_result_prompt',
    description: 'Asks the user which context the prompt should use (2026-07-28 input_required)',
    handler: async (_args, ctx) => {
      const answer = await ctx.elicit({ message: 'What context should the prompt use?', requestedSchema: oneString('context') })
      return { messages: [{ role: 'user', content: { type: 'text', text: `Answer using this context: ${accepted(answer, 'context')}` } }] }
    }
  })
  mcp.completion({
    ref: { type: 'ref/prompt', name: 'test_prompt_with_arguments' },
    handler: ({ value }) => ['test', 'testing', 'tested'].filter(v => v.startsWith(value))
  })
  registerListChangeFixtures(app)
  registerTaskFixtures(app)
}

/**
 * The hooks server-stateless calls while a subscriptions/listen stream is open: each changes its list
 * for real (adds a definition, or removes the one it added), which announces the change to listeners.
 */
function registerListChangeFixtures (app: FastifyInstance): void {
  const { mcp } = app
  /** A trigger tool: registers `name` with `register`, or removes what it registered. */
  const trigger = (tool: string, kind: string, name: string, register: () => DefinitionHandle): void => {
    let handle: DefinitionHandle | undefined
    mcp.tool({
      name: tool,
      description: `Adds the ${kind} ${name}, or removes it: ${kind}s/list changes`,
      handler: () => {
        if (handle?.remove() === true) {
          handle = undefined
          return text(`Removed ${name}`)
        }
        handle = register()
        return text(`Added ${name}`)
      }
    })
  }
  trigger('test_trigger_tool_change', 'tool', 'test_dynamic_tool', () =>
    mcp.tool({ name: 'test_dynamic_tool', description: 'Added by test_trigger_tool_change', handler: () => text('dynamic') }))
  trigger('test_trigger_prompt_change', 'prompt', 'test_dynamic_prompt', () => mcp.prompt({
    name: 'test_dynamic_prompt',
    description: 'Added by test_trigger_prompt_change',
    handler: () => ({ messages: [{ role: 'user', content: { type: 'text', text: 'dynamic' } }] })
  }))
}

/**
 * The tasks-* scenarios (2026-07-28 tasks extension). A tool registered with `task` becomes a task
 * where its handler calls `ctx.startTask()` (for a client that declared the extension); asks made
 * before are multi-round-trip requests, asks after are the task's (`input_required`, `tasks/update`).
 */
function registerTaskFixtures (app: FastifyInstance): void {
  /** Makes the call a task, then works for `ms` (stopping at once when cancelled). */
  const workAsTask = async (ctx: HandlerContext, ms: number): Promise<void> => {
    await ctx.startTask()
    await sleep(ms, undefined, { signal: ctx.signal })
  }
  const { mcp } = app
  mcp.tool({
    name: 'greet',
    description: 'Greets synchronously; never a task',
    inputSchema: { type: 'object', properties: { name: { type: 'string' } } },
    handler: ({ name }) => text(`Hello, ${typeof name === 'string' ? name : 'World'}!`)
  })
  mcp.tool({
    name: 'slow_compute',
    description: 'Waits `seconds`, then answers with `label`; a task for clients that declared the extension',
    task: 'optional',
    inputSchema: { type: 'object', properties: { seconds: { type: 'number', minimum: 0 }, label: { type: 'string' } }, required: ['seconds'] },
    handler: async ({ seconds, label }, ctx) => {
      await workAsTask(ctx, Number(seconds) * 1000)
      return text(`Computed ${String(label ?? 'result')} after ${String(seconds)} s`)
    }
  })
  mcp.tool({
    name: 'failing_job',
    description: 'A task whose tool fails (an isError result after about a second); needs the tasks extension',
    task: 'required',
    handler: async (_args, ctx) => {
      await workAsTask(ctx, 1000)
      return { ...text('The job failed: the input could not be processed'), isError: true }
    }
  })
  mcp.tool({
    name: 'protocol_error_job',
    description: 'A task that fails with a JSON-RPC error',
    task: 'optional',
    handler: async (_args, ctx) => {
      await workAsTask(ctx, 500)
      throw new Error('protocol_error_job always fails')
    }
  })
  mcp.tool({
    name: 'confirm_delete',
    description: 'A task that asks the user to confirm deleting `filename`',
    task: 'optional',
    inputSchema: { type: 'object', properties: { filename: { type: 'string' } }, required: ['filename'] },
    handler: async ({ filename }, ctx) => {
      await ctx.startTask()
      const { confirm } = await ctx.input({ confirm: askConfirmDelete(String(filename)) })
      return text(confirm.action === 'accept' && confirm.content?.confirm === true ? `Deleted ${String(filename)}` : `Kept ${String(filename)}`)
    }
  })
  mcp.tool({
    name: 'multi_input',
    description: 'A task that asks two questions at once',
    task: 'optional',
    handler: async (_args, ctx) => {
      await ctx.startTask()
      // The tasks mrtr-input scenario answers both questions with { name, confirm }: each schema asks one of them.
      const { name, confirm } = await ctx.input({ name: askString('What is your name?', 'name'), confirm: askConfirm('Please confirm') })
      return text(`name: ${accepted(name, 'name')}, confirmed: ${confirm.action}`)
    }
  })
  mcp.tool({
    name: 'test_tool_with_task',
    description: 'Asks the user\'s name first (a multi-round-trip request), then runs as a task; needs the tasks extension',
    task: 'required',
    handler: async (_args, ctx) => {
      const { user_name: answer } = await ctx.input({ user_name: askName() })
      await ctx.startTask()
      await sleep(200, undefined, { signal: ctx.signal })
      return text(`Hello, ${accepted(answer, 'name')}, from a task`)
    }
  })
}
