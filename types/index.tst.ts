// The types that ship: the package imports itself by name, which resolves through package.json
// `exports` to dist/index.d.ts (`npm test` builds dist/ before running these).
import Fastify from 'fastify'
import { expect, test } from 'tstyche'
import mcpCancellation, {
  mcpCancellation as named,
  RequestCancelledError,
  ToolError,
  type CancelOutcome,
  type DefinitionHandle,
  type McpNotifier,
  type HandlerContext,
  type McpCancellationApi,
  type McpPrincipal,
  type McpReadiness,
  type OAuthOptions,
  type ResumabilityOptions,
  type WorkerContext,
  type WorkerToolHandler,
  elicitation,
  sampling,
  rootsList,
  type ElicitResult,
  type CreateMessageResult,
  type ListRootsResult,
  type Root
} from 'fastify-mcp-cancellation'
import type { Registry } from 'prom-client'

test('default and named exports are the same plugin', () => {
  expect(named).type.toBe<typeof mcpCancellation>()
})

test('options are checked', () => {
  const app = Fastify()
  expect(app.register(mcpCancellation, { path: '/mcp', responseMode: 'sse', maxRows: Infinity })).type.not.toRaiseError()
  expect(app.register(mcpCancellation, { responseMode: 'stream' })).type.toRaiseError()
  expect(app.register(mcpCancellation, { auth: { jwt: true, principalClaim: 'sub' } })).type.not.toRaiseError()
  const oauth: OAuthOptions = { resource: 'https://mcp.example.com/mcp', authorizationServers: ['https://auth.example.com'] }
  expect(app.register(mcpCancellation, { auth: { oauth } })).type.not.toRaiseError()
  expect(app.register(mcpCancellation, { auth: { oauth: { resource: 'https://mcp.example.com/mcp' } } })).type.toRaiseError()
  expect(app.register(mcpCancellation, { auth: { oauth: { ...oauth, scopeSatisfies: (granted: readonly string[], needed: string) => granted.includes(needed) } } })).type.not.toRaiseError()
  expect(app.register(mcpCancellation, { bodyLimit: '1mb' })).type.toRaiseError()
  expect(app.register(mcpCancellation, { events: false })).type.not.toRaiseError()
  expect(app.register(mcpCancellation, { events: { maxListenersPerScope: 4, coalesceMs: 10 } })).type.not.toRaiseError()
  expect(app.register(mcpCancellation, { events: { maxListeners: '10' } })).type.toRaiseError()
  expect(app.register(mcpCancellation, { maxInFlightPerScope: 64 })).type.not.toRaiseError()
  expect(app.register(mcpCancellation, { maxInFlightPerScope: '64' })).type.toRaiseError()
  expect(app.register(mcpCancellation, { resumability: false })).type.not.toRaiseError()
  const resumability: ResumabilityOptions = { windowMs: 60_000, retryMs: 2000, pollIntervalMs: 30_000 }
  expect(app.register(mcpCancellation, { resumability })).type.not.toRaiseError()
  expect(app.register(mcpCancellation, { resumability: { windowMs: '30s' } })).type.toRaiseError()
})

test('registering returns a handle; notify announces changes', () => {
  const app = Fastify()
  expect(app.mcp.tool({ name: 't', handler: () => ({ content: [] }) })).type.toBe<DefinitionHandle>()
  expect(app.mcp.prompt({ name: 'p', handler: () => ({ messages: [] }) }).remove()).type.toBe<boolean>()
  expect(app.mcp.notify).type.toBe<McpNotifier>()
  expect(app.mcp.notify.resourceUpdated('file:///a')).type.toBe<void>()
  expect(app.mcp.notify.resourceUpdated(1)).type.toRaiseError()
})

test('fastify.mcp registers typed tools whose context carries cancellation', () => {
  const app = Fastify()
  app.mcp.tool<{ ms: number }>({
    name: 'sleep',
    inputSchema: { type: 'object', properties: { ms: { type: 'integer' } } },
    handler: (args, ctx) => {
      expect(args.ms).type.toBe<number>()
      expect(ctx).type.toBe<HandlerContext>()
      expect(ctx.signal).type.toBe<AbortSignal>()
      expect(ctx.cancelled()).type.toBe<boolean>()
      expect(ctx.closeStream()).type.toBe<void>()
      expect(ctx.principal).type.toBe<McpPrincipal | null>()
      return { content: [] }
    }
  })
  expect(app.mcp.tool({ name: 'bad', handler: () => 'text' })).type.toRaiseError()
})

test('fastify.mcpCancellation and the request decorators are typed', () => {
  const app = Fastify()
  expect(app.mcpCancellation).type.toBe<McpCancellationApi>()
  expect(app.mcpCancellation.cancel({ requestId: 1, scope: 'ip:127.0.0.1', reason: 'why' })).type.toBe<CancelOutcome | 'invalid'>()
  expect(app.mcpCancellation.cancel({ requestId: 1, scope: 'ip:127.0.0.1' })).type.toBe<CancelOutcome | 'invalid'>()
  app.get('/', async request => {
    expect(request.mcpScope).type.toBe<string | null>()
    expect(request.mcpPrincipal).type.toBe<McpPrincipal | null>()
    expect(request.mcpPrincipal?.scopes).type.toBe<readonly string[] | undefined>()
    expect(app.mcpCancellation.scope(request)).type.toBe<string>()
    return null
  })
})

test('error classes are exported', () => {
  expect(new ToolError('x')).type.toBeAssignableTo<Error>()
  expect(new RequestCancelledError('why', 'client').source).type.toBe<'client' | 'disconnect' | 'lifetime' | 'server' | 'task'>()
})

test('fastify.mcpCancellation: cancel cannot take reason and scope in the wrong order, and the registry stays out of reach', () => {
  const app = Fastify()
  expect(app.mcpCancellation.cancel(1, 'why', 'ip:127.0.0.1')).type.toRaiseError()
  expect(app.mcpCancellation.cancel({ requestId: 1, reason: 'why' })).type.toRaiseError()
  expect(app.mcpCancellation.cancel({ requestId: { id: 1 }, scope: 'ip:127.0.0.1' })).type.toRaiseError()
  expect(app.mcpCancellation).type.not.toHaveProperty('admit')
  expect(app.mcpCancellation).type.not.toHaveProperty('begin')
  expect(app.mcpCancellation).type.not.toHaveProperty('finish')
  expect(app.mcpCancellation).type.not.toHaveProperty('shutdown')
  expect(app.mcpCancellation).type.not.toHaveProperty('store')
  expect(app.mcpCancellation.rows).type.toBe<number>()
})

test('fastify.mcpMetrics is the prom-client registry, or null without metrics', () => {
  expect(Fastify().mcpMetrics).type.toBe<Registry | null>()
})

test('fastify.mcpReadiness() says whether the node is ready, and why not', () => {
  expect(Fastify().mcpReadiness()).type.toBe<McpReadiness>()
  expect<McpReadiness['redis']>().type.toBe<'none' | 'connected' | 'disconnected'>()
  expect<McpReadiness['revocations']>().type.toBe<'none' | 'synced' | 'syncing'>()
})

test('redis takes a URL, a Cluster\'s seed URLs, or a client', () => {
  const app = Fastify()
  expect(app.register(mcpCancellation, { redis: ['redis://a:7000', 'redis://b:7001'] })).type.not.toRaiseError()
  expect(app.register(mcpCancellation, { redis: 6379 })).type.toRaiseError()
  expect(app.register(mcpCancellation, { taskReplicationTimeoutMs: 500 })).type.not.toRaiseError()
})

test('worker tools get the handler context without the Fastify request and logger', () => {
  expect<WorkerContext>().type.not.toHaveProperty('request')
  expect<WorkerContext>().type.not.toHaveProperty('log')
  expect<HandlerContext>().type.toBeAssignableTo<WorkerContext>()
  const spin: WorkerToolHandler<{ ms: number }> = ({ ms }, ctx) => {
    expect(ctx.signal).type.toBe<AbortSignal>()
    expect(ctx.principal).type.toBe<McpPrincipal | null>()
    expect(ctx.throwIfCancelled).type.toBe<() => void>()
    expect(ctx.closeStream).type.toBe<() => void>()
    return { content: [{ type: 'text', text: `spun ${ms}` }] }
  }
  expect(spin).type.toBeAssignableTo<(args: { ms: number }, ctx: WorkerContext) => unknown>()
  const wrong: WorkerToolHandler = (_args, ctx) => {
    expect(ctx.request).type.toRaiseError()
    return { content: [] }
  }
  expect(wrong).type.toBeAssignableTo<WorkerToolHandler>()
})

test('asking the client: answers typed by kind and key, in process and in workers', () => {
  const app = Fastify()
  app.mcp.tool({
    name: 'ask',
    handler: async (_args, ctx) => {
      expect(ctx.supports('elicitation.url')).type.toBe<boolean>()
      expect(ctx.supports('telepathy')).type.toRaiseError()
      expect(await ctx.elicit({ message: 'Name?' })).type.toBe<ElicitResult>()
      expect(await ctx.sample({ messages: [], maxTokens: 5 })).type.toBe<CreateMessageResult>()
      expect(await ctx.roots()).type.toBe<Root[]>()
      const answers = await ctx.input({ who: elicitation({ message: 'Who?' }), text: sampling({ messages: [], maxTokens: 5 }), where: rootsList() })
      expect(answers.who).type.toBe<ElicitResult>()
      expect(answers.text).type.toBe<CreateMessageResult>()
      expect(answers.where).type.toBe<ListRootsResult>()
      expect(answers.nope).type.toRaiseError()
      expect(ctx.clientCapabilities).type.toBe<Record<string, unknown> | undefined>()
      ctx.state = { step: 1 }
      return { content: [] }
    }
  })
  const worker: WorkerToolHandler = async (_args, ctx) => {
    expect(await ctx.elicit({ message: 'Name?' })).type.toBe<ElicitResult>()
    expect((await ctx.input({ where: rootsList() })).where).type.toBe<ListRootsResult>()
    return { content: [] }
  }
  expect(worker).type.toBeAssignableTo<WorkerToolHandler>()
})

test('tasks: a tool declares task support; handlers (in process or in a worker) start the task', () => {
  const app = Fastify()
  app.mcp.tool({
    name: 'long',
    task: 'optional',
    handler: async (_args, ctx) => {
      expect(ctx.startTask()).type.toBe<Promise<void>>()
      return { content: [] }
    }
  })
  app.mcp.tool({ name: 'must', task: 'required', handler: () => ({ content: [] }) })
  expect(app.mcp.tool({ name: 'bad', task: 'sometimes', handler: () => ({ content: [] }) })).type.toRaiseError()
  const worker: WorkerToolHandler = async (_args, ctx) => {
    await ctx.startTask()
    return { content: [] }
  }
  expect(worker).type.toBeAssignableTo<WorkerToolHandler>()
})
