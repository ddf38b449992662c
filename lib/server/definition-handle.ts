/** What registering a tool, prompt, resource or resource template returns. */
export interface DefinitionHandle {
  /**
   * Unregisters the definition (calls already running finish) and announces the list change to
   * listening clients; false when it was removed already. A definition registered again under the
   * same name is a new one: an old handle never removes it.
   */
  remove: () => boolean
}

/** Removes `entry` from `map` only while it is still the entry under `key`. */
export function removerOf<K, V> (map: Map<K, V>, key: K, entry: V): () => boolean {
  return () => map.get(key) === entry && map.delete(key)
}
