import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { createInterface } from 'node:readline'

/** A benchmark server running in its own `node` process, so it never shares a core's event loop with autocannon. */
export interface ServerProcess {
  /** `http://127.0.0.1:<port>` */
  origin: string
  pid: number
  stop (): Promise<void>
}

const STARTUP_TIMEOUT_MS = 30_000
const STOP_TIMEOUT_MS = 10_000

/**
 * Starts `benchmarks/servers/<name>.ts` with `node [nodeArgs] --import tsx`. The script listens on
 * 127.0.0.1 port 0 and prints the port as its first stdout line; anything else it prints is passed through to stderr.
 */
export async function startServer (name: string, nodeArgs: readonly string[] = []): Promise<ServerProcess> {
  const script = fileURLToPath(new URL(`../servers/${name}.ts`, import.meta.url))
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', script], {
    cwd: fileURLToPath(new URL('../..', import.meta.url)),
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, NODE_ENV: 'production' }
  })
  try {
    const port = await readPort(child, name)
    return { origin: `http://127.0.0.1:${port}`, pid: child.pid!, stop: () => stop(child) }
  } catch (error) {
    child.kill('SIGKILL')
    throw error
  }
}

async function readPort (child: ChildProcess, name: string): Promise<number> {
  const lines = createInterface({ input: child.stdout! })
  let timer: NodeJS.Timeout | undefined
  try {
    return await Promise.race([
      (async () => {
        const first = await lines[Symbol.asyncIterator]().next()
        if (first.done === true) throw new Error(`server "${name}" closed stdout before printing its port`)
        const port = Number(first.value.trim())
        if (Number.isInteger(port) && port > 0) return port
        throw new Error(`server "${name}" printed ${JSON.stringify(first.value)} instead of its port`)
      })(),
      once(child, 'exit').then(([code, signal]) => { throw new Error(`server "${name}" exited (${String(code ?? signal)}) before listening`) }),
      new Promise<never>((_resolve, reject) => { timer = setTimeout(() => reject(new Error(`server "${name}" did not listen within ${STARTUP_TIMEOUT_MS} ms`)), STARTUP_TIMEOUT_MS) })
    ])
  } finally {
    clearTimeout(timer)
    // Whatever the server prints after its port (e.g. BENCH_SERVER_LOG logs) goes to our stderr.
    lines.close()
    child.stdout!.pipe(process.stderr)
  }
}

/** SIGTERM lets the server close cleanly (and write a `--cpu-prof` profile); SIGKILL if it hangs. */
async function stop (child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = once(child, 'exit')
  child.kill('SIGTERM')
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS)
  await exited
  clearTimeout(timer)
}
