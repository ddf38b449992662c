import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { buildApp, json, postLegacy, postModern } from '../helpers/inject.js'

function fixtures (app: FastifyInstance): void {
  app.mcp.resource({
    uri: 'test://static-text',
    name: 'Static text resource',
    description: 'a fixed text',
    mimeType: 'text/plain',
    handler: uri => ({ contents: [{ uri, mimeType: 'text/plain', text: 'This is the content of the static text resource.' }] })
  })
  app.mcp.resource({
    uri: 'test://static-binary',
    name: 'Static binary resource',
    mimeType: 'image/png',
    handler: uri => ({ contents: [{ uri, mimeType: 'image/png', blob: 'iVBORw0KGgo=' }] })
  })
  app.mcp.resourceTemplate({
    uriTemplate: 'test://template/{id}/data',
    name: 'Template resource',
    mimeType: 'application/json',
    handler: (uri, { id }) => ({
      contents: [{ uri, mimeType: 'application/json', text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) }]
    })
  })
  app.mcp.prompt({
    name: 'test_simple_prompt',
    description: 'A simple prompt without arguments',
    handler: () => ({ messages: [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt for testing.' } }] })
  })
  app.mcp.prompt({
    name: 'test_prompt_with_arguments',
    description: 'A prompt with two required arguments',
    arguments: [
      { name: 'arg1', description: 'First test argument', required: true },
      { name: 'arg2', description: 'Second test argument', required: true },
      { name: 'arg3', description: 'Optional' }
    ],
    handler: ({ arg1, arg2 }) => ({
      messages: [{ role: 'user', content: { type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` } }]
    })
  })
  app.mcp.completion({
    ref: { type: 'ref/prompt', name: 'test_prompt_with_arguments' },
    handler: ({ value }) => ['test', 'testing', 'tested', 'other'].filter(v => v.startsWith(value))
  })
  app.mcp.completion({
    ref: { type: 'ref/resource', uri: 'test://template/{id}/data' },
    handler: ({ value }, _ctx, { arguments: args }) => ({ values: Array.from({ length: 150 }, (_, i) => `${args.prefix ?? ''}${value}${i}`) })
  })
}

for (const era of ['legacy', 'modern'] as const) {
  const rpc = async (app: FastifyInstance, method: string, params: Record<string, unknown> = {}) =>
    era === 'legacy' ? await postLegacy(app, method, params) : await postModern(app, method, params)

  t.test(`${era}: resources/list`, async t => {
    const app = await buildApp(t, {}, fixtures)
    const res = await rpc(app, 'resources/list')
    t.equal(res.statusCode, 200)
    t.same(json(res).result.resources, [
      { uri: 'test://static-text', name: 'Static text resource', description: 'a fixed text', mimeType: 'text/plain' },
      { uri: 'test://static-binary', name: 'Static binary resource', mimeType: 'image/png' }
    ])
  })

  t.test(`${era}: resources/templates/list`, async t => {
    const app = await buildApp(t, {}, fixtures)
    const res = await rpc(app, 'resources/templates/list')
    t.equal(res.statusCode, 200)
    t.same(json(res).result.resourceTemplates, [
      { uriTemplate: 'test://template/{id}/data', name: 'Template resource', mimeType: 'application/json' }
    ])
  })

  t.test(`${era}: resources/read of a static resource`, async t => {
    const app = await buildApp(t, {}, fixtures)
    const res = await rpc(app, 'resources/read', { uri: 'test://static-text' })
    t.equal(res.statusCode, 200)
    t.same(json(res).result.contents, [{ uri: 'test://static-text', mimeType: 'text/plain', text: 'This is the content of the static text resource.' }])
    const binary = await rpc(app, 'resources/read', { uri: 'test://static-binary' })
    t.equal(json(binary).result.contents[0].blob, 'iVBORw0KGgo=')
  })

  t.test(`${era}: resources/read through a template`, async t => {
    const app = await buildApp(t, {}, fixtures)
    const res = await rpc(app, 'resources/read', { uri: 'test://template/123/data' })
    t.equal(res.statusCode, 200)
    const [content] = json(res).result.contents as Array<{ uri: string, mimeType: string, text: string }>
    t.equal(content?.uri, 'test://template/123/data')
    t.equal(content?.mimeType, 'application/json')
    t.same(JSON.parse(content?.text ?? 'null'), { id: '123', templateTest: true, data: 'Data for ID: 123' })
    const encoded = await rpc(app, 'resources/read', { uri: 'test://template/a%20b/data' })
    t.equal(JSON.parse(json(encoded).result.contents[0].text).id, 'a b', 'variables are percent-decoded')
  })

  t.test(`${era}: a resource that does not exist`, async t => {
    const app = await buildApp(t, {}, fixtures)
    const expected = era === 'legacy' ? -32002 : -32602
    for (const uri of ['test://missing', 'test://template/1/other', 'test://template//data', 'test://template/a/b/data']) {
      const res = await rpc(app, 'resources/read', { uri })
      t.equal(res.statusCode, 200, uri)
      const body = json(res)
      t.equal(body.id, 1)
      t.equal(body.error?.code, expected, `${uri} is ${expected}`)
      t.notOk(body.result)
    }
  })

  t.test(`${era}: prompts/list`, async t => {
    const app = await buildApp(t, {}, fixtures)
    const res = await rpc(app, 'prompts/list')
    t.equal(res.statusCode, 200)
    const prompts = json(res).result.prompts as Array<Record<string, unknown>>
    t.same(prompts.map(p => p.name), ['test_simple_prompt', 'test_prompt_with_arguments'])
    t.same(prompts[1]?.arguments, [
      { name: 'arg1', description: 'First test argument', required: true },
      { name: 'arg2', description: 'Second test argument', required: true },
      { name: 'arg3', description: 'Optional' }
    ])
  })

  t.test(`${era}: prompts/get with and without arguments`, async t => {
    const app = await buildApp(t, {}, fixtures)
    const simple = await rpc(app, 'prompts/get', { name: 'test_simple_prompt' })
    t.same(json(simple).result.messages, [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt for testing.' } }])
    const withArgs = await rpc(app, 'prompts/get', { name: 'test_prompt_with_arguments', arguments: { arg1: 'hello', arg2: 'world' } })
    t.equal(withArgs.statusCode, 200)
    t.equal(json(withArgs).result.messages[0].content.text, "Prompt with arguments: arg1='hello', arg2='world'")
  })

  t.test(`${era}: prompts/get with a missing required argument is -32602`, async t => {
    const app = await buildApp(t, {}, fixtures)
    for (const args of [{ arg1: 'only one' }, {}, undefined]) {
      const res = await rpc(app, 'prompts/get', args === undefined
        ? { name: 'test_prompt_with_arguments' }
        : { name: 'test_prompt_with_arguments', arguments: args })
      t.equal(res.statusCode, 200)
      t.equal(json(res).error?.code, -32602, JSON.stringify(args))
    }
    const nonString = await rpc(app, 'prompts/get', { name: 'test_prompt_with_arguments', arguments: { arg1: 1, arg2: 'x' } })
    t.equal(json(nonString).error?.code, -32602, 'non-string argument')
    const unknown = await rpc(app, 'prompts/get', { name: 'nope' })
    t.equal(json(unknown).error?.code, -32602, 'unknown prompt')
  })

  t.test(`${era}: completion/complete returns values`, async t => {
    const app = await buildApp(t, {}, fixtures)
    const res = await rpc(app, 'completion/complete', {
      ref: { type: 'ref/prompt', name: 'test_prompt_with_arguments' },
      argument: { name: 'arg1', value: 'test' }
    })
    t.equal(res.statusCode, 200)
    t.same(json(res).result.completion.values, ['test', 'testing', 'tested'])
  })

  t.test(`${era}: completion/complete caps values at 100 and passes context`, async t => {
    const app = await buildApp(t, {}, fixtures)
    const res = await rpc(app, 'completion/complete', {
      ref: { type: 'ref/resource', uri: 'test://template/{id}/data' },
      argument: { name: 'id', value: 'v' },
      context: { arguments: { prefix: 'p-' } }
    })
    const { completion } = json(res).result
    t.equal(completion.values.length, 100)
    t.equal(completion.values[0], 'p-v0')
    t.equal(completion.total, 150)
    t.equal(completion.hasMore, true)
  })

  t.test(`${era}: completion/complete of an unknown ref is -32602`, async t => {
    const app = await buildApp(t, {}, fixtures)
    const res = await rpc(app, 'completion/complete', { ref: { type: 'ref/prompt', name: 'nope' }, argument: { name: 'a', value: '' } })
    t.equal(json(res).error?.code, -32602)
  })

  t.test(`${era}: capabilities advertise resources, prompts and completions`, async t => {
    const app = await buildApp(t, {}, fixtures)
    const res = era === 'legacy'
      ? await postLegacy(app, 'initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'c', version: '1' } })
      : await postModern(app, 'server/discover')
    const { capabilities } = json(res).result
    t.ok(capabilities.resources)
    t.ok(capabilities.prompts)
    t.ok(capabilities.completions)
    t.notOk(capabilities.tools, 'no tools registered, no tools capability')
  })
}

for (const method of ['resources/subscribe', 'resources/unsubscribe']) {
  t.test(`legacy: ${method} returns {}`, async t => {
    const app = await buildApp(t, {}, fixtures)
    const res = await postLegacy(app, method, { uri: 'test://static-text' }, { id: 4 })
    t.equal(res.statusCode, 200)
    t.strictSame(json(res), { jsonrpc: '2.0', id: 4, result: {} })
  })

  t.test(`legacy without sessions: ${method} checks its URI as with sessions (1 to events.maxUriBytes bytes)`, async t => {
    const app = await buildApp(t, { events: { maxUriBytes: 64 } }, fixtures)
    for (const uri of [42, '', `file:///${'x'.repeat(64)}`]) {
      const res = await postLegacy(app, method, { uri }, { id: 5 })
      t.equal(json(res).error?.code, -32602, `uri ${JSON.stringify(uri).slice(0, 12)}: -32602`)
      t.match(json(res).error?.message, /1 to 64 bytes/)
    }
  })
}

t.test('legacy: the resources capability claims subscribe only with sessions, where updates have a stream to go on', async t => {
  const initialize = { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'c', version: '1' } }
  const stateless = await buildApp(t, {}, fixtures)
  t.same(json(await postLegacy(stateless, 'initialize', initialize)).result.capabilities.resources, {})
  const withSessions = await buildApp(t, { sessions: { secret: 'a-session-secret-of-at-least-32-bytes!' } }, fixtures)
  t.same(json(await postLegacy(withSessions, 'initialize', initialize)).result.capabilities.resources, { subscribe: true, listChanged: true })
})
