// The types that ship: the package imports itself by name, which resolves through package.json
// `exports` to dist/index.d.ts (`npm test` builds dist/ before running these).
import Fastify from 'fastify'
import { expect, test } from 'tstyche'
import mcpCancellation, {
  mcpCancellation as named,
  RequestCancelledError,
  ToolError,
  type CancelOutcome,
  type HandlerContext,
  type McpCancellationApi
} from 'fastify-mcp-cancellation'

test('default and named exports are the same plugin', () => {
  expect(named).type.toBe<typeof mcpCancellation>()
})

test('options are checked', () => {
  const app = Fastify()
  expect(app.register(mcpCancellation, { path: '/mcp', responseMode: 'sse', maxRows: Infinity })).type.not.toRaiseError()
  expect(app.register(mcpCancellation, { responseMode: 'stream' })).type.toRaiseError()
  expect(app.register(mcpCancellation, { auth: { jwt: true, principalClaim: 'sub' } })).type.not.toRaiseError()
  expect(app.register(mcpCancellation, { bodyLimit: '1mb' })).type.toRaiseError()
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
      expect(ctx.principal).type.toBe<string | null>()
      return { content: [] }
    }
  })
  expect(app.mcp.tool({ name: 'bad', handler: () => 'text' })).type.toRaiseError()
})

test('fastify.mcpCancellation and the request decorators are typed', () => {
  const app = Fastify()
  expect(app.mcpCancellation).type.toBe<McpCancellationApi>()
  expect(app.mcpCancellation.cancel(1, 'why', 'ip:127.0.0.1')).type.toBe<CancelOutcome | 'invalid'>()
  app.get('/', async request => {
    expect(request.mcpScope).type.toBe<string | null>()
    expect(request.mcpPrincipal).type.toBe<string | null>()
    expect(app.mcpCancellation.scope(request)).type.toBe<string>()
    return null
  })
})

test('error classes are exported', () => {
  expect(new ToolError('x')).type.toBeAssignableTo<Error>()
  expect(new RequestCancelledError('why', 'client').source).type.toBe<'client' | 'disconnect' | 'lifetime' | 'server'>()
})
