import { readFileSync } from 'node:fs'

/**
 * How busy the rest of the machine was during a round: CPU time used by every process other than
 * the benchmark's own two (this one, running autocannon, and the server), in cores (1.0 = one core
 * fully taken). On a 2-core machine anything but ~0 makes the figures suspect. Linux /proc only;
 * elsewhere `stop()` returns undefined.
 */
export function watchNoise (serverPid: number): { stop: () => { otherCores: number, serverCores: number, benchCores: number, seconds: number } | undefined } {
  const started = performance.now()
  const start = sample(serverPid)
  return {
    stop () {
      const end = sample(serverPid)
      if (start === undefined || end === undefined) return undefined
      const perCore = (end.total - start.total) / end.cpus
      if (perCore <= 0) return undefined
      const server = end.server - start.server
      const self = end.self - start.self
      const busy = end.busy - start.busy
      return {
        otherCores: Math.max(0, busy - server - self) / perCore,
        serverCores: server / perCore,
        benchCores: self / perCore,
        seconds: (performance.now() - started) / 1000
      }
    }
  }
}

interface Sample { busy: number, total: number, cpus: number, self: number, server: number }

function sample (serverPid: number): Sample | undefined {
  try {
    const stat = readFileSync('/proc/stat', 'utf8').split('\n')
    const fields = stat[0]!.trim().split(/\s+/).slice(1).map(Number)
    // user nice system idle iowait irq softirq steal (guest time is already inside user/nice)
    const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = fields
    const busy = user + nice + system + irq + softirq + steal
    return {
      busy,
      total: busy + idle + iowait,
      cpus: stat.filter(line => /^cpu\d/.test(line)).length,
      self: processTicks('self'),
      server: processTicks(String(serverPid))
    }
  } catch {
    return undefined
  }
}

/** utime + stime of all the process's threads, in clock ticks (same unit as /proc/stat). */
function processTicks (pid: string): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return Number(fields[11]) + Number(fields[12])
}

/**
 * Waits until the machine is quiet: a `windowMs` window in which all processes together use less than
 * `maxCores` (the benchmark is idle then, so it is all someone else's load). Gives up after `timeoutMs`
 * and returns false. Without /proc it returns true at once.
 */
export async function waitForQuiet (timeoutMs: number, maxCores = 0.1, windowMs = 2000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const start = sample(process.pid)
    if (start === undefined) return true
    await new Promise(resolve => setTimeout(resolve, windowMs))
    const end = sample(process.pid)
    if (end === undefined) return true
    const perCore = (end.total - start.total) / end.cpus
    if (perCore > 0 && (end.busy - start.busy) / perCore < maxCores) return true
    if (Date.now() >= deadline) return false
  }
}
