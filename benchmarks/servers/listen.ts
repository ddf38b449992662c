import type { Server } from 'node:http'

/**
 * The contract between a benchmark server and `support/server-process.ts`: the port as the first
 * stdout line once listening, and a clean close on SIGTERM/SIGINT (so `--cpu-prof` can write its file).
 */
export function announce (server: Server, close: () => Promise<unknown>): void {
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('expected a TCP server')
  process.stdout.write(`${address.port}\n`)
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => {
      close().then(() => { process.exitCode = 0 }, (error: unknown) => {
        console.error(error)
        process.exitCode = 1
      })
    })
  }
}

export const HOST = '127.0.0.1'

/** Fastify's `logger` option: off, unless BENCH_SERVER_LOG names a level (to see why a server answers 500). */
export function loggerOption (): false | { level: string } {
  const level = process.env.BENCH_SERVER_LOG
  return level === undefined || level === '' ? false : { level }
}
