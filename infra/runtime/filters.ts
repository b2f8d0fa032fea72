// filters.ts evaluates Trigger filters against an event's attributes: the legacy
// `filter.attributes` (exact match on all) and the `filters` dialect (exact, prefix,
// suffix, all, any, not). An absent attribute never matches.
import type { Filter } from './knative.ts';

/** Attributes are an event's context attributes and extensions as strings. */
export type Attributes = Record<string, string | undefined>;

const each = (m: Record<string, string>, a: Attributes, test: (v: string, want: string) => boolean) =>
  Object.entries(m).every(([k, want]) => a[k] !== undefined && test(a[k]!, want));

/** matches evaluates one filter expression. */
export function matches(f: Filter, a: Attributes): boolean {
  if (f.exact && !each(f.exact, a, (v, w) => v === w)) return false;
  if (f.prefix && !each(f.prefix, a, (v, w) => v.startsWith(w))) return false;
  if (f.suffix && !each(f.suffix, a, (v, w) => v.endsWith(w))) return false;
  if (f.all && !f.all.every((x) => matches(x, a))) return false;
  if (f.any && !f.any.some((x) => matches(x, a))) return false;
  if (f.not && matches(f.not, a)) return false;
  return true;
}

/** triggerMatches applies a Trigger: `filters` wins over `filter.attributes` when both are set. */
export function triggerMatches(
  t: { attributes?: Record<string, string>; filters?: Filter[] },
  a: Attributes,
): boolean {
  if (t.filters && t.filters.length > 0) return t.filters.every((f) => matches(f, a));
  if (t.attributes) return each(t.attributes, a, (v, w) => v === w);
  return true;
}
