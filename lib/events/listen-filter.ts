import { invalidParams, isJsonObject, type JsonObject } from '../core/jsonrpc.js'
import { LIST_KINDS, type ListKind } from '../cluster/server-events.js'

/** What a `subscriptions/listen` asks for: its `params.notifications` (a `SubscriptionFilter`), checked. */
export interface ListenFilter {
  lists: ListKind[]
  /** Deduplicated. */
  resources: string[]
  /** Deduplicated; the tasks extension's `taskIds`. */
  taskIds: string[]
}

export interface FilterLimits {
  /** Most `resourceSubscriptions` (and most `taskIds`) one listen may name. */
  maxSubscriptions: number
  maxUriBytes: number
}

/** The filter field of each list's `notifications/<list>/list_changed`. */
export const LIST_FIELDS: Readonly<Record<ListKind, string>> = {
  tools: 'toolsListChanged',
  prompts: 'promptsListChanged',
  resources: 'resourcesListChanged'
}

/**
 * Reads `params.notifications`. A field set to anything but a boolean (or a list of strings) is
 * -32602, and so are more URIs than a listen may name and a URI longer than `maxUriBytes`; a field
 * this server does not know is left out of the acknowledgement (a later revision's notification type,
 * which the specification says to omit rather than refuse), and a URI named twice counts once.
 */
export function parseListenFilter (params: JsonObject, limits: FilterLimits): ListenFilter {
  const filter = params.notifications
  if (!isJsonObject(filter)) throw invalidParams('notifications must be an object (a SubscriptionFilter)')
  const lists: ListKind[] = []
  for (const list of LIST_KINDS) {
    const wanted = filter[LIST_FIELDS[list]]
    if (wanted !== undefined && typeof wanted !== 'boolean') throw invalidParams(`notifications.${LIST_FIELDS[list]} must be a boolean`)
    if (wanted === true) lists.push(list)
  }
  return {
    lists,
    resources: stringsOf(filter, 'resourceSubscriptions', limits, uri => {
      if (uri === '' || Buffer.byteLength(uri) > limits.maxUriBytes) {
        throw invalidParams(`notifications.resourceSubscriptions holds URIs of 1 to ${limits.maxUriBytes} bytes`)
      }
    }),
    taskIds: stringsOf(filter, 'taskIds', limits, () => {})
  }
}

function stringsOf (filter: JsonObject, field: string, { maxSubscriptions }: FilterLimits, check: (value: string) => void): string[] {
  const values = filter[field]
  if (values === undefined) return []
  if (!Array.isArray(values) || !values.every(value => typeof value === 'string')) throw invalidParams(`notifications.${field} must be an array of strings`)
  if (values.length > maxSubscriptions) throw invalidParams(`notifications.${field} names at most ${maxSubscriptions} values`)
  const unique = [...new Set(values as string[])]
  for (const value of unique) check(value)
  return unique
}

/** The acknowledgement's `notifications`: the honoured subset, without the fields left out. */
export function acknowledgedFilter (filter: ListenFilter): JsonObject {
  const acknowledged: JsonObject = {}
  for (const list of filter.lists) acknowledged[LIST_FIELDS[list]] = true
  if (filter.resources.length > 0) acknowledged.resourceSubscriptions = filter.resources
  if (filter.taskIds.length > 0) acknowledged.taskIds = filter.taskIds
  return acknowledged
}
