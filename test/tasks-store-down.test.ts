/**
 * With `redis` configured but Redis unreachable, tasks say so: creating one, and reading one, are a 503
 * with a JSON-RPC error naming the task store, never a 500, and nothing is queued. Calls that do not
 * become tasks go on as usual.
 */
import { createServer } from 'node:net'
import t from 'tap'
import { buildApp } from './helpers/mcp.js'
import { injectSender, WITH_TASKS, WITHOUT_TASKS } from './helpers/tasks.js'

/** A port nothing listens on. */
async function closedPort (): Promise<number> {
  const server = createServer()
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise<void>(resolve => server.close(() => { resolve() }))
  return port
}

t.test('Redis down: a task cannot be created or read (503 saying why); ordinary calls are served', async t => {
  const port = await closedPort()
  let ran = 0
  const app = await buildApp(t, { redis: `redis://127.0.0.1:${port}`, secret: 'tasks-store-down-secret-0123456789abcdef' }, app => {
    app.mcp.tool({
      name: 'long',
      task: 'optional',
      handler: async (_args, ctx) => {
        ran++
        await ctx.startTask()
        return { content: [{ type: 'text', text: 'done' }] }
      }
    })
  })
  const send = injectSender(app)
  const created = await send('tools/call', { name: 'long' }, { capabilities: WITH_TASKS })
  t.equal(created.status, 503, 'creating a task: 503')
  t.equal(created.body.error?.code, -32603)
  t.match(created.body.error?.message, /task store cannot be reached/)
  t.equal(ran, 1, 'the handler stopped at startTask')
  const read = await send('tasks/get', { taskId: 'AAAAAAAAAAAAAAAAAAAAAA' })
  t.equal(read.status, 503, 'reading a task: 503')
  t.match(read.body.error?.message, /task store cannot be reached/)
  const plain = await send('tools/call', { name: 'long' }, { capabilities: WITHOUT_TASKS })
  t.equal(plain.status, 200, 'without the extension the call is served as usual')
  t.same(plain.body.result?.content, [{ type: 'text', text: 'done' }])
})
