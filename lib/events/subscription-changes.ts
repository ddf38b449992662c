import type { SubscriptionChange } from './subscription-store.js'

/**
 * The handlers a subscription store tells of its changes (`SubscriptionStore.onChange`), called in the
 * order they were added. One that throws is passed over: a broken stream must neither keep the others
 * from hearing a change nor undo a change already made.
 */
export class SubscriptionChanges {
  readonly #handlers: Array<(change: SubscriptionChange) => void> = []

  add (handler: (change: SubscriptionChange) => void): void {
    this.#handlers.push(handler)
  }

  announce (change: SubscriptionChange): void {
    for (const handler of this.#handlers) {
      try {
        handler(change)
      } catch {}
    }
  }
}
