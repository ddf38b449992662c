/**
 * The request path stays synchronous for handlers that answer synchronously (most tools do): a value
 * is only awaited when it is a promise, so a synchronous answer costs no promise and no microtask.
 */
export type MaybePromise<T> = T | PromiseLike<T>

export function isPromiseLike<T> (value: MaybePromise<T>): value is PromiseLike<T> {
  return typeof (value as PromiseLike<T> | null)?.then === 'function'
}
