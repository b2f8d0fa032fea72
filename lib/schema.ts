// schema.ts checks an object offline against a CRD's structural OpenAPI schema, for the
// parts the API server checks at admission: types, required fields, enums, patterns,
// lengths, list sizes, map-list key uniqueness, and the CEL rules this project writes
// (evaluated by their known meaning; an unknown rule is reported as not checked).
// Messages follow the API server's field-path style, so an offline check and the
// server's refusal read alike.

/** Schema is the subset of a structural OpenAPI v3 schema that is checked here. */
export interface Schema {
  type?: string;
  properties?: Record<string, Schema>;
  items?: Schema;
  required?: string[];
  enum?: unknown[];
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  maxItems?: number;
  minimum?: number;
  'x-kubernetes-list-type'?: string;
  'x-kubernetes-list-map-keys'?: string[];
  'x-kubernetes-validations'?: { rule: string; message?: string }[];
}

/** SchemaProblem is one refusal, at a field path. */
export interface SchemaProblem {
  path: string;
  message: string;
}

// The CEL rules of the SyncResource CRD, by their text. Transition rules (oldSelf) need
// the stored object and hold for a create.
const knownRules: Record<string, (self: Record<string, unknown>) => boolean> = {
  'has(self.resource) || has(self.resourceFrom) || has(self.subresource)': (o) =>
    o.resource !== undefined || o.resourceFrom !== undefined || o.subresource !== undefined,
  '!has(self.resource) || !has(self.resourceFrom)': (o) =>
    o.resource === undefined || o.resourceFrom === undefined,
  "!has(self.onImmutableChange) || self.onImmutableChange == 'Fail' || self.strategy == 'CreateAndSync'": (
    o,
  ) => o.onImmutableChange === undefined || o.onImmutableChange === 'Fail' || o.strategy === 'CreateAndSync',
  "self.strategy != 'Delete' || !has(self.subresource)": (o) =>
    o.strategy !== 'Delete' || o.subresource === undefined,
  '!has(self.dataFrom) || has(self.resource)': (o) => o.dataFrom === undefined || o.resource !== undefined,
  "!has(self.dataFrom) || self.strategy != 'Delete'": (o) =>
    o.dataFrom === undefined || o.strategy !== 'Delete',
  'self == oldSelf': () => true,
};

const typeOf = (v: unknown): string => {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
};

const fits = (type: string, v: unknown): boolean =>
  type === typeOf(v) || (type === 'number' && typeOf(v) === 'integer');

/** checkSchema returns every problem of value against schema, with paths below path; unchecked collects rules it cannot evaluate. */
export function checkSchema(
  value: unknown,
  schema: Schema,
  path: string,
  unchecked: string[] = [],
): SchemaProblem[] {
  if (schema.type && !fits(schema.type, value))
    return [
      {
        path,
        message: `Invalid value: "${typeOf(value)}": ${path} in body must be of type ${schema.type}: "${typeOf(value)}"`,
      },
    ];
  const out: SchemaProblem[] = [];
  if (schema.enum && !schema.enum.includes(value)) {
    out.push({
      path,
      message: `Unsupported value: ${JSON.stringify(value)}: supported values: ${schema.enum.map((e) => JSON.stringify(e)).join(', ')}`,
    });
  }
  if (typeof value === 'string') out.push(...checkString(value, schema, path));
  if (typeof value === 'number' && schema.minimum !== undefined && value < schema.minimum) {
    out.push({
      path,
      message: `Invalid value: ${value}: ${path} in body should be greater than or equal to ${schema.minimum}`,
    });
  }
  if (Array.isArray(value)) out.push(...checkList(value, schema, path, unchecked));
  if (typeOf(value) === 'object')
    out.push(...checkObject(value as Record<string, unknown>, schema, path, unchecked));
  else if (schema['x-kubernetes-validations']) {
    for (const rule of schema['x-kubernetes-validations'])
      if (!knownRules[rule.rule]) unchecked.push(`${path}: ${rule.rule}`);
  }
  return out;
}

function checkString(value: string, schema: Schema, path: string): SchemaProblem[] {
  const out: SchemaProblem[] = [];
  if (schema.minLength !== undefined && value.length < schema.minLength)
    out.push({
      path,
      message: `Invalid value: ${JSON.stringify(value)}: ${path} in body should be at least ${schema.minLength} chars long`,
    });
  if (schema.maxLength !== undefined && value.length > schema.maxLength)
    out.push({ path, message: `Too long: may not be more than ${schema.maxLength} bytes` });
  if (schema.pattern && !new RegExp(schema.pattern, 'u').test(value))
    out.push({
      path,
      message: `Invalid value: ${JSON.stringify(value)}: ${path} in body should match '${schema.pattern}'`,
    });
  return out;
}

/** checkList checks a list's size, each of its items, and the uniqueness of a map-list's keys. */
function checkList(value: unknown[], schema: Schema, path: string, unchecked: string[]): SchemaProblem[] {
  const out: SchemaProblem[] = [];
  if (schema.maxItems !== undefined && value.length > schema.maxItems)
    out.push({ path, message: `Too many: ${value.length}: must have at most ${schema.maxItems} items` });
  const keys = schema['x-kubernetes-list-type'] === 'map' ? (schema['x-kubernetes-list-map-keys'] ?? []) : [];
  const seen = new Set<string>();
  value.forEach((v, i) => {
    if (schema.items) out.push(...checkSchema(v, schema.items, `${path}[${i}]`, unchecked));
    if (keys.length === 0 || typeOf(v) !== 'object') return;
    const key = JSON.stringify(keys.map((k) => (v as Record<string, unknown>)[k]));
    if (seen.has(key))
      out.push({
        path: `${path}[${i}]`,
        message: `Duplicate value: ${JSON.stringify(Object.fromEntries(keys.map((k) => [k, (v as Record<string, unknown>)[k]])))}`,
      });
    seen.add(key);
  });
  return out;
}

/** checkObject checks required fields, each property, and the CEL rules this project writes (knownRules). */
function checkObject(
  obj: Record<string, unknown>,
  schema: Schema,
  path: string,
  unchecked: string[],
): SchemaProblem[] {
  const out: SchemaProblem[] = [];
  for (const r of schema.required ?? [])
    if (obj[r] === undefined) out.push({ path: `${path}.${r}`, message: 'Required value' });
  for (const [k, sub] of Object.entries(schema.properties ?? {})) {
    if (obj[k] !== undefined) out.push(...checkSchema(obj[k], sub, `${path}.${k}`, unchecked));
  }
  for (const rule of schema['x-kubernetes-validations'] ?? []) {
    const check = knownRules[rule.rule];
    if (!check) unchecked.push(`${path}: ${rule.rule}`);
    else if (!check(obj))
      out.push({ path, message: `Invalid value: "object": ${rule.message ?? `failed rule: ${rule.rule}`}` });
  }
  return out;
}
