/**
 * Tracing of a listen stream (issue 22): one SERVER span `subscriptions/listen` for the stream's whole
 * life, with an `mcp.notification` event per notification sent carrying its kind, and never the URI it
 * named (a URI can identify a user's document, and a trace store keeps it longer than the stream).
 */
import t from 'tap'
import { SpanKind } from '@opentelemetry/api'
import { EventStream } from '../helpers/event-stream.js'
import { modernHeaders, modernMeta } from '../helpers/jsonrpc.js'
import { listenPlugin } from '../helpers/listen.js'
import { installOtel } from '../helpers/otel.js'
import { waitFor } from '../helpers/wait.js'

const SECRET_URI = 'file:///home/alice/diary.txt'

t.test('a listen stream is one span, with an event per notification kind and no URI', async t => {
  const otel = installOtel(t, { metrics: false })
  const { app, url } = await listenPlugin(t, {}, {}, app => {
    app.mcp.resource({ uri: SECRET_URI, name: 'diary', handler: uri => ({ contents: [{ uri, text: 'dear diary' }] }) })
  })
  const stream = EventStream.post(url, {
    jsonrpc: '2.0', id: 'listen-1', method: 'subscriptions/listen', params: { _meta: modernMeta(), notifications: { toolsListChanged: true, resourceSubscriptions: [SECRET_URI] } }
  }, { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...modernHeaders('subscriptions/listen') as Record<string, string> })
  t.ok(await stream.received('notifications/subscriptions/acknowledged'), 'acknowledged')
  app.mcp.tool({ name: 'added', handler: () => ({ content: [] }) })
  t.ok(await stream.received('notifications/tools/list_changed'), 'a list change arrived')
  app.mcp.notify.resourceUpdated(SECRET_URI)
  t.ok(await stream.received('notifications/resources/updated'), 'a resource update arrived')
  t.notOk(otel.spans().some(span => span.name === 'subscriptions/listen'), 'the span is open while the stream is')

  stream.close()
  t.ok(await waitFor(() => otel.spans().some(span => span.name === 'subscriptions/listen'), 5000), 'the span ends with the stream')
  const span = otel.spans().find(span => span.name === 'subscriptions/listen')!
  t.equal(span.kind, SpanKind.SERVER)
  t.same(span.events.map(event => [event.name, event.attributes?.['mcp.notification.kind']]), [
    ['mcp.notification', 'tools_list_changed'],
    ['mcp.notification', 'resource_updated']
  ], 'one event per notification, by kind (the acknowledgement is not one)')
  const everything = JSON.stringify([span.attributes, span.events])
  t.notOk(everything.includes('diary'), 'no URI in the span\'s attributes or events')
})
