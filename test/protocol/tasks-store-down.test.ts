/**
 * With `redis` configured but Redis unreachable, tasks say so: a tool that requires a task, and
 * reading a task, answer a JSON-RPC error naming the task store (an ordinary response, never a 5xx:
 * the node is healthy), and nothing is queued. A tool whose task is optional runs as an ordinary call
 * (the extension lets the server decide per call), and so do calls that never become tasks.
 */
import { createServer } from 'node:net'
import t from 'tap'
import { buildApp } from '../helpers/inject.js'
import { injectSender, WITH_TASKS, WITHOUT_TASKS } from '../helpers/tasks.js'

/** A port nothing listens on. */
async function closedPort (): Promise<number> {
  const server = createServer()
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise<void>(resolve => server.close(() => { resolve() }))
  return port
}

t.test('Redis down: an optional task runs as an ordinary call, a required one and tasks/* get an error saying why (never a 5xx)', async t => {
  const port = await closedPort()
  const ran = { optional: 0, required: 0 }
  const app = await buildApp(t, { redis: `redis://127.0.0.1:${port}`, secret: 'tasks-store-down-secret-0123456789abcdef' }, app => {
    for (const task of ['optional', 'required'] as const) {
      app.mcp.tool({
        name: task,
        task,
        handler: async (_args, ctx) => {
          ran[task]++
          await ctx.startTask()
          return { content: [{ type: 'text', text: `${task} done` }] }
        }
      })
    }
  })
  const send = injectSender(app)
  const optional = await send('tools/call', { name: 'optional' }, { capabilities: WITH_TASKS })
  t.equal(optional.status, 200)
  t.same(optional.body.result?.content, [{ type: 'text', text: 'optional done' }], 'an optional task tool answers its result on the POST')
  t.equal(optional.body.result?.resultType, 'complete', 'not a task')

  const required = await send('tools/call', { name: 'required' }, { capabilities: WITH_TASKS })
  t.equal(required.status, 200, 'a required task tool: an ordinary JSON-RPC error, not a 5xx')
  t.equal(required.body.error?.code, -32000)
  t.match(required.body.error?.message, /task store cannot be reached/)
  t.equal(ran.required, 1, 'its handler stopped at startTask')

  for (const method of ['tasks/get', 'tasks/update', 'tasks/cancel']) {
    const answer = await send(method, { taskId: 'AAAAAAAAAAAAAAAAAAAAAA', inputResponses: {} })
    t.equal(answer.status, 200, `${method}: not a 5xx`)
    t.equal(answer.body.error?.code, -32000, method)
    t.match(answer.body.error?.message, /task store cannot be reached/, `${method} says why`)
  }
  const plain = await send('tools/call', { name: 'optional' }, { capabilities: WITHOUT_TASKS })
  t.equal(plain.status, 200, 'without the extension the call is served as usual')
  t.same(plain.body.result?.content, [{ type: 'text', text: 'optional done' }])
})
