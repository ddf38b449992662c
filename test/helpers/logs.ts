/** A Fastify logger writing into memory, and the lines a test looks for in it. */
import { Writable } from 'node:stream'
import type { FastifyBaseLogger, FastifyServerOptions } from 'fastify'

/** A Fastify logger writing JSON lines into memory: `options` for Fastify (or the demo's `buildApp`), and the parsed lines. */
export function captureLogs (level = 'warn'): { options: FastifyServerOptions, lines: () => Array<Record<string, unknown>> } {
  const raw: string[] = []
  const stream = new Writable({
    write (chunk: Buffer, _encoding, callback) {
      raw.push(chunk.toString('utf8'))
      callback()
    }
  })
  return {
    options: { logger: { level, stream } },
    lines: () => raw.join('').split('\n').filter(line => line.trim() !== '').map(line => JSON.parse(line) as Record<string, unknown>)
  }
}

/** Pino's numeric level of `error`. */
const ERROR_LEVEL = 50

/** The lines a node logged at error level or above. */
export function errorLines (node: { logs: () => Array<Record<string, unknown>> }): Array<Record<string, unknown>> {
  return node.logs().filter(line => typeof line.level === 'number' && line.level >= ERROR_LEVEL)
}

const noop = (): void => {}
/** A logger that writes nothing, for what takes a Fastify logger outside a Fastify instance. */
export const silentLogger: FastifyBaseLogger = {
  level: 'silent', fatal: noop, error: noop, warn: noop, info: noop, debug: noop, trace: noop, silent: noop, child: () => silentLogger
}
