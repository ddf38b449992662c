import { context, propagation, ROOT_CONTEXT, trace, type Context, type TextMapGetter } from '@opentelemetry/api'

/** W3C limits: a version-00 traceparent is 55 characters (later versions may add fields); tracestate 512 and 32 members; baggage 8192. */
const MAX_TRACEPARENT = 256
const MAX_TRACESTATE = 512
const MAX_TRACESTATE_MEMBERS = 32
const MAX_BAGGAGE = 8192

/**
 * Reads trace context from a JSON object that a client or another node wrote (`params._meta`, a bus
 * message): only own string values of the W3C keys, none over the W3C limits. A `tracestate` over
 * them is dropped whole; the propagator itself rejects a malformed `traceparent`.
 */
const CARRIER_GETTER: TextMapGetter<Record<string, unknown>> = {
  keys: carrier => Object.keys(carrier),
  get: (carrier, key) => {
    if (!Object.hasOwn(carrier, key)) return undefined
    const value = carrier[key]
    if (typeof value !== 'string') return undefined
    switch (key) {
      case 'traceparent': return value.length <= MAX_TRACEPARENT ? value : undefined
      case 'tracestate': return value.length <= MAX_TRACESTATE && value.split(',').length <= MAX_TRACESTATE_MEMBERS ? value : undefined
      case 'baggage': return value.length <= MAX_BAGGAGE ? value : undefined
      default: return undefined
    }
  }
}

/** The context a carrier holds, when it names a valid remote span (anything else is ignored: a fresh trace starts). */
export function carriedContext (carrier: unknown): Context | undefined {
  if (typeof carrier !== 'object' || carrier === null || Array.isArray(carrier)) return undefined
  const extracted = propagation.extract(ROOT_CONTEXT, carrier as Record<string, unknown>, CARRIER_GETTER)
  const spanContext = trace.getSpanContext(extracted)
  return spanContext !== undefined && trace.isSpanContextValid(spanContext) ? extracted : undefined
}

/** The W3C fields of the active span's context, for a message to another node; undefined without one. */
export function activeCarrier (): Record<string, string> | undefined {
  const active = context.active()
  if (trace.getSpan(active) === undefined) return undefined
  const carrier: Record<string, string> = {}
  propagation.inject(active, carrier)
  return Object.keys(carrier).length === 0 ? undefined : carrier
}
