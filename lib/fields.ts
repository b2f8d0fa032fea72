// fields.ts reads server-side apply's field sets (metadata.managedFields, fieldsV1): the
// fields one manager owns, and an object projected onto them, so a diff can show exactly
// the fields the product sets and nothing it leaves to others.
import { isMap } from './values.ts';

/** FieldSet is a fieldsV1 tree: "f:<name>", "k:<json keys>", "v:<json value>", "i:<index>", "." for the node itself. */
export type FieldSet = { [key: string]: FieldSet };

/** ManagedFieldsEntry is one entry of metadata.managedFields. */
export interface ManagedFieldsEntry {
  manager?: string;
  operation?: string;
  subresource?: string;
  time?: string;
  fieldsV1?: FieldSet;
}

/** managedFieldsOf returns an object's managedFields entries. */
export const managedFieldsOf = (
  obj: { metadata?: { [k: string]: unknown } } | undefined,
): ManagedFieldsEntry[] => (obj?.metadata?.managedFields ?? []) as ManagedFieldsEntry[];

/** ownedFields merges the Apply field sets of manager on the object itself, or on its subresource. */
export function ownedFields(
  obj: { metadata?: { [k: string]: unknown } } | undefined,
  manager: string,
  subresource?: string,
): FieldSet {
  let out: FieldSet = {};
  for (const e of managedFieldsOf(obj)) {
    if (
      e.manager === manager &&
      e.operation === 'Apply' &&
      (e.subresource ?? '') === (subresource ?? '') &&
      e.fieldsV1
    )
      out = mergeFields(out, e.fieldsV1);
  }
  return out;
}

/** ownsPath tells whether a field set holds the field at path (map keys; a list counts as one field). */
export function ownsPath(fields: FieldSet, path: string[]): boolean {
  let node: FieldSet | undefined = fields;
  for (const seg of path) {
    node = node[`f:${seg}`];
    if (!node) return false;
  }
  return true;
}

/** mergeFields is the union of two field sets. */
export function mergeFields(a: FieldSet, b: FieldSet): FieldSet {
  const out: FieldSet = { ...a };
  for (const [k, v] of Object.entries(b)) out[k] = out[k] ? mergeFields(out[k], v) : v;
  return out;
}

function matches(element: unknown, key: string): boolean {
  if (key.startsWith('k:')) {
    const keys = JSON.parse(key.slice(2)) as Record<string, unknown>;
    return (
      isMap(element) &&
      Object.entries(keys).every(([k, v]) => JSON.stringify(element[k]) === JSON.stringify(v))
    );
  }
  if (key.startsWith('v:')) return JSON.stringify(element) === JSON.stringify(JSON.parse(key.slice(2)));
  return false;
}

/** project keeps of value only what fields names; undefined when none of it is there. */
export function project(value: unknown, fields: FieldSet): unknown {
  const children = Object.keys(fields).filter((k) => k !== '.');
  if (children.length === 0) return value;
  if (Array.isArray(value)) {
    const kept = value.flatMap((el, i) => {
      const key = children.find((k) => matches(el, k) || k === `i:${i}`);
      if (key === undefined) return [];
      const p = project(el, fields[key]!);
      return p === undefined ? [] : [p];
    });
    return kept.length > 0 ? kept : undefined;
  }
  if (!isMap(value)) return undefined;
  const out: Record<string, unknown> = {};
  for (const k of children) {
    if (!k.startsWith('f:')) continue;
    const name = k.slice(2);
    if (value[name] === undefined) continue;
    const p = project(value[name], fields[k]!);
    if (p !== undefined) out[name] = p;
  }
  return Object.keys(out).length > 0 ? out : undefined;
}
