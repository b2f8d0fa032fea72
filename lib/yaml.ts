// yaml.ts reads manifests exactly as kubectl does. kubectl turns YAML into JSON with
// sigs.k8s.io/yaml, which resolves plain scalars by go-yaml v2's rules, a YAML 1.1
// dialect of its own: `0644` is octal (420), `yes`/`on`/`y` are true, `1_000` is 1000,
// timestamps stay strings, base-60 numbers do not exist. js-yaml's own schemas follow
// YAML 1.2 or YAML 1.1 to the letter, and both differ from go-yaml v2 in places that
// real manifests use (file modes above all), so KUBECTL_SCHEMA below implements
// go-yaml v2's resolve() (resolve.go) on js-yaml's tag API. Every reader of manifest
// text (the engine, the CLI) goes through readYamlDocuments.
import {
  defineMappingTag,
  defineScalarTag,
  loadAll,
  mergeTag,
  NOT_RESOLVED,
  Schema,
  seqTag,
  strTag,
} from 'js-yaml';

/** YamlError is text that kubectl would not read, or would read into something we cannot carry. */
export class YamlError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'YamlError';
  }
}

// go-yaml v2's resolve table: the plain scalars it looks up before anything else.
const BOOL_TRUE = ['y', 'Y', 'yes', 'Yes', 'YES', 'true', 'True', 'TRUE', 'on', 'On', 'ON'];
const BOOL_FALSE = ['n', 'N', 'no', 'No', 'NO', 'false', 'False', 'FALSE', 'off', 'Off', 'OFF'];
const NULLS = ['', '~', 'null', 'Null', 'NULL'];
const SPECIAL_FLOATS: Record<string, number> = {
  '.nan': NaN,
  '.NaN': NaN,
  '.NAN': NaN,
  '.inf': Infinity,
  '.Inf': Infinity,
  '.INF': Infinity,
  '+.inf': Infinity,
  '+.Inf': Infinity,
  '+.INF': Infinity,
  '-.inf': -Infinity,
  '-.Inf': -Infinity,
  '-.INF': -Infinity,
};
const resolveMap = new Map<string, boolean | null | number>([
  ...BOOL_TRUE.map((s) => [s, true] as const),
  ...BOOL_FALSE.map((s) => [s, false] as const),
  ...NULLS.map((s) => [s, null] as const),
  ...Object.entries(SPECIAL_FLOATS),
]);

// go-yaml v2 tries a lookup only for scalars whose first character hints at one.
const hints = new Set([...'+-0123456789yYnNtTfFoO~.']);
const YAML_STYLE_FLOAT = /^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/;
const DOT_FLOAT = /^\.[0-9]+([eE][-+]?[0-9]+)?$/;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const UINT64_MAX = 2n ** 64n - 1n;
const DIGITS: Record<number, RegExp> = { 2: /^[01]+$/, 8: /^[0-7]+$/, 10: /^[0-9]+$/, 16: /^[0-9a-fA-F]+$/ };
const PREFIX: Record<string, number> = { '0b': 2, '0B': 2, '0o': 8, '0O': 8, '0x': 16, '0X': 16 };

/** parseGoInt is Go's strconv.ParseInt(s, 0, 64) (signed) or ParseUint (unsigned), as a bigint, or undefined. */
function parseGoInt(s: string, signed: boolean): bigint | undefined {
  let body = s;
  let negative = false;
  if (signed && (body[0] === '+' || body[0] === '-')) {
    negative = body[0] === '-';
    body = body.slice(1);
  }
  let base = 10;
  if (PREFIX[body.slice(0, 2)] !== undefined) {
    base = PREFIX[body.slice(0, 2)]!;
    body = body.slice(2);
  } else if (body.length > 1 && body[0] === '0') {
    base = 8;
    body = body.slice(1);
  }
  if (!DIGITS[base]!.test(body)) return undefined;
  const magnitude = base === 10 ? BigInt(body) : BigInt(`0${'box'[[2, 8, 16].indexOf(base)]}${body}`);
  const value = negative ? -magnitude : magnitude;
  if (signed ? value < INT64_MIN || value > INT64_MAX : value > UINT64_MAX) return undefined;
  return value;
}

/** Resolved is a plain scalar as go-yaml v2 resolves it: its tag and JSON value. */
type Resolved = { tag: 'null' | 'bool' | 'int' | 'float' | 'str'; value: unknown };

/** goResolve is go-yaml v2's resolve() for a plain scalar. */
export function goResolve(source: string): Resolved {
  const first = source === '' ? '' : source[0]!;
  if (first !== '' && !hints.has(first)) return { tag: 'str', value: source };
  const known = resolveMap.get(source);
  if (known !== undefined || resolveMap.has(source)) {
    const tag = known === null ? 'null' : typeof known === 'boolean' ? 'bool' : 'float';
    return { tag, value: known };
  }
  if (first === '.') {
    return DOT_FLOAT.test(source) ? { tag: 'float', value: Number(source) } : { tag: 'str', value: source };
  }
  if (!'+-0123456789'.includes(first) || first === '') return { tag: 'str', value: source };
  // go-yaml drops every underscore before it parses a number.
  const plain = source.replaceAll('_', '');
  const int = parseGoInt(plain, true) ?? parseGoInt(plain, false);
  if (int !== undefined) return { tag: 'int', value: int };
  if (YAML_STYLE_FLOAT.test(plain)) {
    const f = Number(plain);
    // Go's ParseFloat fails on overflow, and go-yaml then keeps the text.
    if (Number.isFinite(f)) return { tag: 'float', value: f };
  }
  return { tag: 'str', value: source };
}

/** toNumber carries a resolved integer as a JSON number, refusing what a double cannot hold exactly. */
function toNumber(v: bigint): number {
  if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < BigInt(Number.MIN_SAFE_INTEGER)) {
    throw new YamlError(`integer ${v} is beyond ±2^53 and cannot be carried exactly; quote it if it is text`);
  }
  return Number(v);
}

/** scalarTag is the implicit and explicit tag of one go-yaml kind. */
function scalarTag(kind: 'null' | 'bool' | 'int' | 'float', firstChars: string[]) {
  return defineScalarTag(`tag:yaml.org,2002:${kind}`, {
    implicit: true,
    implicitFirstChars: firstChars,
    resolve: (source) => {
      const r = goResolve(source);
      // An explicit !!float takes an integer too (go-yaml converts it).
      const ok = r.tag === kind || (kind === 'float' && r.tag === 'int');
      if (!ok) return NOT_RESOLVED;
      return typeof r.value === 'bigint' ? toNumber(r.value) : r.value;
    },
    identify: () => false,
  });
}

const digitsAndSigns = [...'+-0123456789'];

/** Mapping keys become JSON object keys as sigs.k8s.io/yaml writes them. */
function keyString(key: unknown): string | undefined {
  if (typeof key === 'string') return key;
  if (typeof key === 'boolean') return String(key);
  if (typeof key === 'number') {
    if (Number.isNaN(key)) return '.nan';
    if (key === Infinity) return '.inf';
    if (key === -Infinity) return '-.inf';
    return String(key);
  }
  return undefined;
}

const goMapTag = defineMappingTag('tag:yaml.org,2002:map', {
  create: () => ({}) as Record<string, unknown>,
  identify: () => false,
  addPair: (map, key, value) => {
    const k = keyString(key);
    if (k === undefined)
      return `a mapping key must be a string, number or boolean, not ${key === null ? 'null' : typeof key}`;
    Object.defineProperty(map, k, { value, enumerable: true, configurable: true, writable: true });
    return '';
  },
  has: (map, key) => {
    const k = keyString(key);
    return k !== undefined && Object.hasOwn(map, k);
  },
  keys: (map) => Object.keys(map),
  get: (map, key) => map[keyString(key) ?? ''] ?? null,
});

/** KUBECTL_SCHEMA resolves scalars as kubectl (go-yaml v2 through sigs.k8s.io/yaml) does. */
export const KUBECTL_SCHEMA = new Schema([
  strTag,
  seqTag,
  goMapTag,
  mergeTag,
  scalarTag('null', ['', '~', 'n', 'N']),
  scalarTag('bool', [...'yYnNtTfFoO']),
  scalarTag('int', digitsAndSigns),
  scalarTag('float', [...digitsAndSigns, '.']),
  // go-yaml keeps a !!timestamp as its text, and decodes !!binary into a (UTF-8) string.
  defineScalarTag('tag:yaml.org,2002:timestamp', { resolve: (s) => s, identify: () => false }),
  defineScalarTag('tag:yaml.org,2002:binary', {
    resolve: (s) => Buffer.from(s.replace(/\s/g, ''), 'base64').toString('utf8'),
    identify: () => false,
  }),
]);

/** YamlLimits bound what a text may make the reader do. */
export interface YamlLimits {
  /** maxDepth bounds nesting (a deep text is refused, not a stack overflow). */
  maxDepth?: number;
}

/**
 * readYamlDocuments reads every document of text as kubectl would. Aliases are refused
 * at the first one (no "billion laughs"); a value JSON cannot carry (.nan, .inf), which
 * kubectl refuses too ("json: unsupported value"), is refused with its path.
 */
export function readYamlDocuments(text: string, limits: YamlLimits = {}): unknown[] {
  let docs: unknown[];
  try {
    docs = loadAll(text, { schema: KUBECTL_SCHEMA, maxAliases: 0, maxDepth: limits.maxDepth ?? 64 });
  } catch (err) {
    if (err instanceof YamlError) throw err;
    const msg = err instanceof Error ? err.message.split('\n')[0] : String(err);
    throw new YamlError(msg ?? 'unreadable');
  }
  for (const d of docs) checkFinite(d, '');
  return docs;
}

function checkFinite(v: unknown, path: string): void {
  if (typeof v === 'number' && !Number.isFinite(v)) {
    throw new YamlError(
      `${path || 'the document'} is ${v}, which JSON cannot carry (kubectl refuses it too)`,
    );
  }
  if (Array.isArray(v)) v.forEach((x, i) => checkFinite(x, `${path}[${i}]`));
  else if (v !== null && typeof v === 'object') {
    for (const [k, x] of Object.entries(v)) checkFinite(x, path ? `${path}.${k}` : k);
  }
}
