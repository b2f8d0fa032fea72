// manifest.ts parses an item's resource/subresource text into exactly one object,
// rejecting, with a message that names the problem, everything else: several
// documents, aliases (a "billion laughs" text fails at its first alias, before any
// expansion), deep nesting, oversize text, missing identity, list kinds.
import { checkIdentity, IdentityError } from './policy/identity.ts';
import { HASH_ANNOTATION, LEGACY_MARKS, MANAGED_BY_LABEL, OWNER_ANNOTATION, type ObjectId } from './model.ts';
import type { KubeObject } from './kube/objects.ts';
import { deepFreeze, isMap } from './values.ts';
import { readYamlDocuments, YamlError } from './yaml.ts';

/** ManifestError is a problem with an item's text; it stays on that item (reason InvalidManifest). */
export class ManifestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ManifestError';
  }
}

const serverFields = [
  'uid',
  'resourceVersion',
  'creationTimestamp',
  'deletionTimestamp',
  'deletionGracePeriodSeconds',
  'generation',
  'managedFields',
  'selfLink',
];

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a sequence';
  return typeof v === 'object' ? 'a mapping' : `a ${typeof v}`;
}

// The product's marks, and its former annotations (an object carrying them counts as ours),
// are the controller's; the former label is Kyma's own key again and free to set.
const reservedMarks = [
  ['labels', MANAGED_BY_LABEL],
  ['annotations', OWNER_ANNOTATION],
  ['annotations', HASH_ANNOTATION],
  ['annotations', LEGACY_MARKS.owner],
  ['annotations', LEGACY_MARKS.hash],
] as const;

/**
 * parseManifest parses one object from text; field names where the problem lies ("resource",
 * "subresource"). Texts are not memoized: a resync parses every item of every SyncResource
 * each tick, a working set that at scale (S=10,000) outgrows any bound a function's heap
 * allows, and a least-recently-used memo then only costs memory without saving CPU. The
 * object is frozen: its users copy what they change.
 */
export function parseManifest(text: string, field: 'resource' | 'subresource', maxBytes: number): KubeObject {
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > maxBytes) throw new ManifestError(`${field} is ${bytes} bytes, over the limit of ${maxBytes}`);
  return deepFreeze(parse(text, field));
}

function parse(text: string, field: 'resource' | 'subresource'): KubeObject {
  let docs: unknown[];
  try {
    docs = readYamlDocuments(text);
  } catch (err) {
    if (!(err instanceof YamlError)) throw err;
    throw new ManifestError(`${field} is not valid YAML: ${err.message}`);
  }
  docs = docs.filter((d) => d !== null && d !== undefined);
  if (docs.length === 0) throw new ManifestError(`${field} holds no object`);
  if (docs.length > 1)
    throw new ManifestError(`${field} holds ${docs.length} documents; an item takes exactly one object`);
  const obj = docs[0];
  if (!isMap(obj)) throw new ManifestError(`${field} is ${describe(obj)}, not a mapping`);
  for (const key of ['apiVersion', 'kind'] as const) {
    if (typeof obj[key] !== 'string' || obj[key] === '') throw new ManifestError(`${field} has no ${key}`);
  }
  const kind = obj.kind as string;
  if (kind.endsWith('List') && Array.isArray(obj.items)) {
    throw new ManifestError(`${field} is a ${kind}; an item takes exactly one object, not a list`);
  }
  const meta = obj.metadata;
  if (!isMap(meta)) throw new ManifestError(`${field} has no metadata`);
  if (typeof meta.name !== 'string' || meta.name === '')
    throw new ManifestError(`${field} has no metadata.name`);
  if (meta.namespace !== undefined && (typeof meta.namespace !== 'string' || meta.namespace === '')) {
    throw new ManifestError(`${field} has an invalid metadata.namespace`);
  }
  try {
    checkIdentity({
      apiVersion: obj.apiVersion as string,
      kind,
      name: meta.name,
      namespace: meta.namespace as string | undefined,
    });
  } catch (err) {
    if (err instanceof IdentityError) throw new ManifestError(`${field} ${err.message}`);
    throw err;
  }
  for (const [where, reserved] of reservedMarks) {
    const map = meta[where];
    if (isMap(map) && reserved in map) {
      throw new ManifestError(
        `${field} sets metadata.${where}["${reserved}"], which only the controller may set`,
      );
    }
  }
  for (const f of serverFields) delete meta[f];
  return obj as KubeObject;
}

/** idOf returns the identity of a parsed object. */
export const idOf = (o: KubeObject): ObjectId => ({
  apiVersion: o.apiVersion,
  kind: o.kind,
  name: o.metadata.name,
  ...(o.metadata.namespace ? { namespace: o.metadata.namespace } : {}),
});

/** describeId renders an id for messages: "ConfigMap kyma-system/name". */
export const describeId = (id: ObjectId): string =>
  `${id.kind} ${id.namespace ? `${id.namespace}/` : ''}${id.name}`;
