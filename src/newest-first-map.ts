/**
 * Sets `key` in an insertion-ordered map as its newest entry, forgetting the oldest one first when the
 * map holds `max` already: a bounded memory of what was seen last (a link's outcome, the prompt ids a
 * hook's scan read, the scans waiting for a run's end).
 */
export function setNewest<K, V>(map: Map<K, V>, key: K, value: V, max: number): void {
  map.delete(key);
  if (map.size >= max) map.delete(map.keys().next().value!);
  map.set(key, value);
}
