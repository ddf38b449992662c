import http from 'node:http'
import { epochNow } from './child-server.js'
import type { StreamRequest } from './event-fixture.js'

/**
 * A listening stream held by the benchmark (a 2026-07-28 listen or a legacy GET stream) on a
 * connection of its own, read as cheaply as a thousand of them at once allow: it counts the
 * occurrences of one notification's method in the bytes (a match split across two chunks included)
 * and notes the instant of the chunk that brought each, without parsing the JSON. The first SSE
 * event's data is kept whole, to check an acknowledgement.
 */
export class NotificationStream {
  /** The status, once the head arrived; undefined before (a legacy stream's head may wait for its first message). */
  status: number | undefined
  /** Settles once the response is over, however it ended. */
  readonly ended: Promise<void>
  /** The data of the first SSE event, once it arrived whole. */
  readonly first: Promise<string>
  readonly #request: http.ClientRequest
  readonly #marker: string
  readonly #onMatch: ((count: number) => void) | undefined
  readonly #waiters: Array<{ count: number, resolve: (at: number) => void }> = []
  #count = 0
  /** The end of the previous chunk that could begin a match. */
  #tail = ''
  #over = false

  /**
   * Opens `request` to `url`; `marker` is what is counted (a notification's method), `onMatch` hears
   * how many more arrived in each chunk.
   */
  constructor (url: URL, request: StreamRequest, marker: string, onMatch?: (count: number) => void) {
    this.#marker = marker
    this.#onMatch = onMatch
    const { method, headers, body } = request
    this.#request = http.request(url, {
      method,
      agent: false,
      headers: body === undefined ? headers : { ...headers, 'content-length': String(Buffer.byteLength(body)) }
    })
    let resolveFirst!: (data: string) => void
    let rejectFirst!: (error: Error) => void
    this.first = new Promise((resolve, reject) => { resolveFirst = resolve; rejectFirst = reject })
    this.first.catch(() => {})
    this.ended = new Promise(resolve => {
      const end = (): void => {
        if (this.#over) return
        this.#over = true
        rejectFirst(new Error(`the stream ended (HTTP ${String(this.status)}) before its first event`))
        resolve()
      }
      this.#request.on('response', response => {
        this.status = response.statusCode
        let opening: string | undefined = ''
        response.on('data', (chunk: Buffer) => {
          const at = epochNow()
          const text = chunk.toString('latin1')
          if (opening !== undefined) {
            opening += text
            const whole = /(?:^|\n)data: (.*)\n\n/.exec(opening) // after any comment (`: open`)
            if (whole !== null) {
              resolveFirst(Buffer.from(whole[1]!, 'latin1').toString('utf8'))
              opening = undefined
            }
          }
          this.#take(this.#tail + text, at)
        })
        response.on('end', end)
        response.on('error', end)
        response.on('close', end)
      })
      this.#request.on('error', end)
      this.#request.on('close', () => { setImmediate(end) })
    })
    this.#request.end(body)
  }

  /** How many markers have arrived. */
  get count (): number {
    return this.#count
  }

  get over (): boolean {
    return this.#over
  }

  /** Resolves with the instant (`epochNow()`) of the chunk that brought the `count`th marker. */
  async reached (count: number): Promise<number> {
    if (this.#count >= count) return epochNow()
    return await new Promise(resolve => { this.#waiters.push({ count, resolve }) })
  }

  /** The client goes away: destroys the connection. */
  close (): void {
    this.#request.destroy()
  }

  #take (text: string, at: number): void {
    let found = 0
    for (let i = text.indexOf(this.#marker); i !== -1; i = text.indexOf(this.#marker, i + this.#marker.length)) found++
    this.#tail = text.slice(-(this.#marker.length - 1))
    if (found === 0) return
    this.#count += found
    this.#onMatch?.(found)
    for (let i = this.#waiters.length - 1; i >= 0; i--) {
      const waiter = this.#waiters[i]!
      if (waiter.count <= this.#count) {
        this.#waiters.splice(i, 1)
        waiter.resolve(at)
      }
    }
  }
}
