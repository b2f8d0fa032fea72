// values.ts: plain JSON-like values: their shape, a canonical form for digests and
// comparison, JSON-pointer keys, and freezing values that are shared.

/** isMap tells whether v is a plain mapping (not null, not a list). */
export const isMap = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** pointerToken escapes a key for a JSON pointer (RFC 6901): "~" as "~0", "/" as "~1". */
export const pointerToken = (key: string): string => key.replace(/~/g, '~0').replace(/\//g, '~1');

/** isSubset tells whether every field of want is present and equal in have (arrays compared element-wise). */
export function isSubset(want: unknown, have: unknown): boolean {
  if (want === have) return true;
  if (Array.isArray(want)) {
    return Array.isArray(have) && want.length === have.length && want.every((w, i) => isSubset(w, have[i]));
  }
  if (typeof want === 'object' && want !== null) {
    if (typeof have !== 'object' || have === null || Array.isArray(have)) return false;
    const h = have as Record<string, unknown>;
    return Object.entries(want).every(([k, v]) =>
      v === null ? h[k] === undefined || h[k] === null : isSubset(v, h[k]),
    );
  }
  // Numbers the API server renders as strings (and back) compare by value.
  if (
    (typeof want === 'number' && typeof have === 'string') ||
    (typeof want === 'string' && typeof have === 'number')
  ) {
    return String(want) === String(have);
  }
  return false;
}

/** canonical renders v as JSON with sorted keys, for digests and order-insensitive comparison. */
export function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v)
      .sort()
      .filter((k) => (v as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

/** deepFreeze freezes v and everything in it, so that a shared value cannot be changed by one of its users. */
export function deepFreeze<T>(v: T): T {
  if (v && typeof v === 'object' && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const x of Object.values(v)) deepFreeze(x);
  }
  return v;
}
