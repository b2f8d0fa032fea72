// feedback.ts copies chosen fields of a live SKR object into the item's status (as Open
// Cluster Management's status feedback does), so that a KCP manager reads a module CR's
// state without credentials to the SKR. Paths are the part of kubectl's JSONPath that
// selects one value: fields (.status.state), quoted keys (['app.kubernetes.io/name']),
// indexes ([0]) and an equality filter on a list ([?(@.type=="Ready")]). No script, no
// recursion, no wildcard: a path costs at most its length in steps. The one JavaScript
// JSONPath library evaluates scripts and is unmaintained; this subset needs neither.
import { ManifestError } from './manifest.ts';
import type { KubeObject } from './kube/objects.ts';
import type { FeedbackRule, FeedbackValue } from './model.ts';
import { feedbackRefusal } from './policy/rules.ts';

/** MAX_FEEDBACK is the most values an item may ask for; MAX_FEEDBACK_VALUE bounds each value (bytes of its text). */
export const MAX_FEEDBACK = 8;
export const MAX_FEEDBACK_VALUE = 1024;
const MAX_PATH = 256;

type Step = { key: string } | { index: number } | { filter: { path: string[]; value: string } };
/** FeedbackPath is a compiled rule. */
export interface FeedbackPath {
  name: string;
  steps: Step[];
}

const FIELD = /^\.([A-Za-z_$][\w$-]*)/;
const QUOTED = /^\[\s*'([^']*)'\s*\]|^\[\s*"([^"]*)"\s*\]/;
const INDEX = /^\[(\d{1,6})\]/;
const FILTER = /^\[\?\(@((?:\.[A-Za-z_$][\w$-]*)+)\s*==\s*(?:"([^"]*)"|'([^']*)')\)\]/;

/** compilePath reads one path ({.a.b} or .a.b), or throws a ManifestError saying where it stops. */
export function compilePath(rule: FeedbackRule): FeedbackPath {
  let rest = rule.jsonPath.trim();
  if (rest.length > MAX_PATH)
    throw new ManifestError(`feedback ${rule.name}: jsonPath is over ${MAX_PATH} characters`);
  if (rest.startsWith('{') && rest.endsWith('}')) rest = rest.slice(1, -1).trim();
  if (rest.startsWith('$')) rest = rest.slice(1);
  const steps: Step[] = [];
  while (rest.length > 0) {
    let m: RegExpExecArray | null;
    if ((m = FIELD.exec(rest))) steps.push({ key: m[1]! });
    else if ((m = QUOTED.exec(rest))) steps.push({ key: m[1] ?? m[2]! });
    else if ((m = INDEX.exec(rest))) steps.push({ index: Number(m[1]) });
    else if ((m = FILTER.exec(rest)))
      steps.push({ filter: { path: m[1]!.slice(1).split('.'), value: m[2] ?? m[3]! } });
    else
      throw new ManifestError(
        `feedback ${rule.name}: jsonPath ${JSON.stringify(rule.jsonPath)} is not supported at ${JSON.stringify(rest.slice(0, 40))} (fields, ['key'], [n] and [?(@.field=="value")] are)`,
      );
    rest = rest.slice(m[0].length);
  }
  if (steps.length === 0) throw new ManifestError(`feedback ${rule.name}: jsonPath selects nothing`);
  return { name: rule.name, steps };
}

/** compileFeedback checks an item's feedback rules: bounded, unique names, never a Secret's values. */
export function compileFeedback(
  rules: FeedbackRule[],
  kind: { apiVersion: string; kind: string },
): FeedbackPath[] {
  const refused = feedbackRefusal(kind);
  if (refused) throw new ManifestError(refused);
  if (rules.length > MAX_FEEDBACK)
    throw new ManifestError(`feedback has ${rules.length} entries, over the limit of ${MAX_FEEDBACK}`);
  const names = new Set<string>();
  return rules.map((r) => {
    if (names.has(r.name)) throw new ManifestError(`feedback ${r.name} is named twice`);
    names.add(r.name);
    return compilePath(r);
  });
}

function step(at: unknown, s: Step): unknown {
  if ('key' in s)
    return at !== null && typeof at === 'object' && !Array.isArray(at)
      ? (at as Record<string, unknown>)[s.key]
      : undefined;
  if (!Array.isArray(at)) return undefined;
  if ('index' in s) return at[s.index];
  return at.find((x) => {
    let v: unknown = x;
    for (const k of s.filter.path)
      v = v !== null && typeof v === 'object' ? (v as Record<string, unknown>)[k] : undefined;
    return v === s.filter.value;
  });
}

/** readFeedback reads every path from the live object (undefined: none to read); texts are bounded. */
export function readFeedback(paths: FeedbackPath[], live: KubeObject | undefined): FeedbackValue[] {
  return paths.map(({ name, steps }) => {
    if (!live) return { name, message: 'the object does not exist' };
    let at: unknown = live;
    for (const s of steps) at = step(at, s);
    if (at === undefined) return { name, message: 'not set' };
    const text = typeof at === 'string' ? at : JSON.stringify(at);
    if (Buffer.byteLength(text) > MAX_FEEDBACK_VALUE)
      return { name, message: `value is over ${MAX_FEEDBACK_VALUE} bytes` };
    return { name, value: text };
  });
}
