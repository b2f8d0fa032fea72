// rules.ts is the trust boundary (docs/user/security.md lists each rule and its tests), one
// function per rule, called from where the rule applies. Two rules are modules of their own
// beside it: identity.ts (identities and request paths) and kubeconfig.ts (kubeconfigs).
// docs/user/security.md maps every rule to its function here and to the test that attacks it.
// Pure: nothing here reads or writes a cluster.
import type { Config } from '../config.ts';
import { KubeApiError } from '../kube/errors.ts';
import {
  KYMA_NAME_LABEL,
  LEGACY_MARKS,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  OWNER_ANNOTATION,
  objectKey,
  SYNC_SOURCE_LABEL,
  type ObjectId,
} from '../model.ts';
import { IdentityError, parseApiVersion, UnsafePathError } from './identity.ts';

type Meta = {
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    generation?: number;
    annotations?: Record<string, string>;
    labels?: Record<string, string>;
  };
};

// --- Reads and deletes name one object --------------------------------------------------

/** IdentityMismatchError says a read returned something other than the one object asked for; nothing is done with it. */
export class IdentityMismatchError extends Error {
  constructor(asked: string, got: string) {
    super(`reading ${asked} returned ${got}; nothing was done with it`);
    this.name = 'IdentityMismatchError';
  }
}

/**
 * checkReadIdentity: a read must return exactly the object asked for (kind, namespace,
 * name), else IdentityMismatchError. namespace is undefined for a cluster-scoped kind.
 */
export function checkReadIdentity(
  kind: string,
  namespace: string | undefined,
  name: string,
  got: unknown,
): void {
  const o = got as { kind?: unknown; metadata?: { name?: unknown; namespace?: unknown } } | undefined;
  if (o?.kind === kind && o.metadata?.name === name && (o.metadata.namespace || undefined) === namespace)
    return;
  const asked = `${kind} ${namespace ? `${namespace}/` : ''}${name}`;
  throw new IdentityMismatchError(
    asked,
    `${String(o?.kind)} ${o?.metadata?.namespace ? `${o.metadata.namespace}/` : ''}${String(o?.metadata?.name)}`,
  );
}

/**
 * deleteOptionsFor: a delete is of the one object just read, on the condition that it is
 * still that object (its uid); never of a collection, never without the uid.
 */
export function deleteOptionsFor(kind: string, live: Meta): object {
  const uid = live.metadata.uid;
  if (!uid)
    throw new Error(`refusing to delete ${kind} ${live.metadata.name} without the uid of the object read`);
  return { kind: 'DeleteOptions', apiVersion: 'v1', propagationPolicy: 'Background', preconditions: { uid } };
}

// --- Restricted kinds and protected namespaces ------------------------------------------

/** isRestrictedKind: restricted kinds match on group and kind, any version, any letter case. */
export function isRestrictedKind(
  config: Pick<Config, 'restrictedKinds'>,
  group: string,
  kind: string,
): boolean {
  return config.restrictedKinds.some((k) => {
    const parts = k.split('/');
    const g = parts.length === 3 ? parts[0]! : '';
    return g === group && parts.at(-1)!.toLowerCase() === kind.toLowerCase();
  });
}

/**
 * restriction says why an object may not be touched: a restricted kind (group and kind,
 * any version; a v1 Secret whose values come by reference is allowed), a protected
 * namespace, or a Namespace object that is never taken over or deleted (the protected
 * ones, default, kube-*). undefined when it may.
 */
export function restriction(
  id: ObjectId,
  config: Pick<Config, 'restrictedKinds' | 'protectedNamespaces'>,
  secretByReference = false,
): string | undefined {
  const { group } = parseApiVersion(id.apiVersion);
  const referenced = secretByReference && group === '' && id.kind === 'Secret';
  if (!referenced && isRestrictedKind(config, group, id.kind)) {
    const hint =
      group === '' && id.kind.toLowerCase() === 'secret'
        ? '; ship Secret values by reference (dataFrom.secretRef)'
        : '';
    return `kind ${id.apiVersion}/${id.kind} is restricted and never synced${hint}`;
  }
  if (group === '' && id.kind === 'Namespace' && !id.namespace) {
    const name = id.name;
    if (name === 'default' || name.startsWith('kube-') || config.protectedNamespaces.includes(name)) {
      return `Namespace ${name} is protected: it is never taken over or deleted`;
    }
  }
  if (id.namespace && config.protectedNamespaces.includes(id.namespace)) {
    return `namespace ${id.namespace} is protected: nothing is created, changed or deleted in it`;
  }
  return undefined;
}

// --- What we did not create, we never delete --------------------------------------------

/** ownerOf returns the owner annotation of a live object (the former key's, for an object 0.1.0 marked: migrate.ts). */
export const ownerOf = (o: Meta | undefined): string | undefined =>
  o?.metadata.annotations?.[OWNER_ANNOTATION] ?? o?.metadata.annotations?.[LEGACY_MARKS.owner];

/** carriesMark tells whether live carries our label (or a former mark naming owner): an object we may have written. */
export const carriesMark = (live: Meta, owner: string): boolean =>
  live.metadata.labels?.[MANAGED_BY_LABEL] === MANAGED_BY_VALUE ||
  live.metadata.labels?.[LEGACY_MARKS.label] === MANAGED_BY_VALUE ||
  ownerOf(live) === owner;

/**
 * pruneAction says what becomes of an object no item of a SyncResource claims any more.
 * One without our mark, that someone else than a SyncResource wrote, is someone else's:
 * left alone. One another SyncResource still
 * names (shared, by the KCP's inventories) is handed over to it. Otherwise this was the
 * last SyncResource to name it: deleted if a SyncResource created it, released (our
 * marks taken off) if it existed before (adopted).
 */
export function pruneAction(
  live: Meta | undefined,
  owner: string,
  adopted: boolean,
  shared: boolean,
  writtenByUsOnly = false,
): 'delete' | 'release' | 'share' | 'leave' {
  if (!live || !(carriesMark(live, owner) || writtenByUsOnly)) return 'leave';
  if (shared) return 'share';
  return adopted ? 'release' : 'delete';
}

// --- One object, one item ---------------------------------------------------------------

/**
 * firstClaims: the first item in spec order that names an object owns it. Given each
 * item's name and the key of what it names (undefined: nothing), returns for every later
 * item naming a key already named the name of the item that owns it.
 */
export function firstClaims(items: { name: string; key: string | undefined }[]): Map<number, string> {
  const first = new Map<string, string>();
  const later = new Map<number, string>();
  items.forEach(({ name, key }, i) => {
    if (key === undefined) return;
    const owner = first.get(key);
    if (owner === undefined) first.set(key, name);
    else later.set(i, owner);
  });
  return later;
}

// --- A failure stays where it is; status always fits ------------------------------------

/** MAX_MESSAGE bounds an item's message (bytes of text, about 1 KiB); a condition's is 4 of it. */
export const MAX_MESSAGE = 1024;

/** bounded cuts text to max characters, ending a cut text with "…": a status write never fails for its size. */
export function bounded(text: string, max = MAX_MESSAGE): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** isClusterFailure tells whether err says the cluster, not the request, failed: no answer, or the credential refused. */
export const isClusterFailure = (err: KubeApiError): boolean => err.code === 0 || err.authFailure;

/**
 * requestFailure: any status code from the SKR on any request is the failure of the item
 * (or inventory entry) it concerns, what: ApplyFailed; a path or an answer that does not
 * match the object is InvalidManifest. Cluster-level failures and bugs are rethrown: only
 * they may end a run.
 */
export function requestFailure(
  what: string,
  err: unknown,
): { reason: 'ApplyFailed' | 'InvalidManifest'; message: string; transient: boolean } {
  if (err instanceof KubeApiError && !isClusterFailure(err)) {
    return {
      reason: 'ApplyFailed',
      message: `${what}: ${stableMessage(err.status?.message ?? err.message)}`,
      transient: err.transient,
    };
  }
  if (
    err instanceof IdentityError ||
    err instanceof UnsafePathError ||
    err instanceof IdentityMismatchError
  ) {
    return { reason: 'InvalidManifest', message: `${what}: ${err.message}`, transient: false };
  }
  throw err;
}

/**
 * stableMessage sorts the lines of an "errors:" list in an API server message: the server
 * builds it from a Go map, in an order that changes from request to request, and a status
 * that quotes it would be written anew on every run.
 */
export function stableMessage(message: string): string {
  const at = message.indexOf('errors:\n');
  if (at < 0) return message;
  const head = message.slice(0, at + 'errors:\n'.length);
  const rest = message.slice(head.length);
  const end = rest.search(/\n(?! )/);
  const list = end < 0 ? rest : rest.slice(0, end);
  return head + list.split('\n').sort().join('\n') + (end < 0 ? '' : rest.slice(end));
}

// --- Events are not trusted -------------------------------------------------------------

// Which namespaces are acted on, and under which SyncPolicy: tenancy.ts.

/**
 * claimRefusal: an event's claim about a SyncResource (its uid, the generation it was run
 * for) holds only if the live object has that uid and at least that generation; says why
 * not ('gone or replaced', 'generation from the future'), or undefined when it holds.
 */
export function claimRefusal(
  live: Meta | undefined,
  claim: { uid: string; generation: number },
): string | undefined {
  if (!live || live.metadata.uid !== claim.uid) return 'gone or replaced';
  if (!(claim.generation <= (live.metadata.generation ?? 0))) return 'generation from the future';
  return undefined;
}

/**
 * heldBy: the SKR source's claim that objects of a SyncResource changed holds only if the
 * live SyncResource's inventory holds one of them; a run for any other object is skipped
 * (the uid is claimRefusal's).
 */
export function heldBy(
  live: { status?: { synced?: readonly ObjectId[] } },
  objects: readonly ObjectId[],
): boolean {
  const inventory = new Set((live.status?.synced ?? []).map(objectKey));
  return objects.some((o) => inventory.has(objectKey(o)));
}

/**
 * mayUseResolvedSecret: apply-items uses the SKR client of the access Secret an event
 * names only if that Secret is in home, where the SyncResource's Kymas are (its own
 * namespace, or the control-plane namespace for a team's: tenancy.ts kymaHome), and was
 * resolved for the Kyma the live spec names (the client cache holds it for that Kyma);
 * otherwise it resolves the Secret again.
 */
export const mayUseResolvedSecret = (
  live: { spec: { kyma: string } },
  claim: { kyma: string; secret?: { namespace: string } | undefined },
  home: string,
): boolean => live.spec.kyma === claim.kyma && claim.secret?.namespace === home;

/**
 * resultNamesSpec: a result for the live generation must name exactly the live spec's
 * items, in order (a run's result always does); a result for an older generation, a
 * cluster error or a deletion names none.
 */
export function resultNamesSpec(
  result: { generation: number; items: { name: string }[]; clusterError?: unknown; deleting?: unknown },
  live: Meta & { spec: { items?: { name: string }[] } },
): boolean {
  if (result.generation !== live.metadata.generation || result.clusterError || result.deleting) return true;
  const spec = (live.spec.items ?? []).map((i) => i.name);
  return result.items.length === spec.length && result.items.every((i, n) => i.name === spec[n]);
}

/**
 * statusWriteTests are the JSON-patch tests of a status write made without reading first:
 * the object must still be the one decided on (uid, resourceVersion), of the generation and
 * with the item names the result claims; a failed test changes nothing.
 */
export function statusWriteTests(
  sr: Meta & { metadata: { resourceVersion?: string } },
  claim: { generation: number; items: string[] },
): object[] {
  return [
    { op: 'test', path: '/metadata/uid', value: sr.metadata.uid },
    { op: 'test', path: '/metadata/resourceVersion', value: sr.metadata.resourceVersion },
    { op: 'test', path: '/metadata/generation', value: claim.generation },
    ...claim.items.map((name, i) => ({ op: 'test', path: `/spec/items/${i}/name`, value: name })),
  ];
}

// --- Values by reference, and what never leaves -----------------------------------------

/**
 * sourceRefusal: a source (a Secret for dataFrom, a ConfigMap for resourceFrom) ships only
 * if it is labelled a sync source and for the SyncResource's Kyma; a ConfigMap without a
 * Kyma label serves every Kyma of its namespace (forEveryKyma). Says why not, or undefined.
 */
export function sourceRefusal(
  what: string,
  labels: Record<string, string> | undefined,
  kyma: string,
  forEveryKyma: boolean,
): string | undefined {
  const l = labels ?? {};
  if (l[SYNC_SOURCE_LABEL] !== 'true')
    return `${what} is not a sync source: it needs the label ${SYNC_SOURCE_LABEL}="true"`;
  const forKyma = l[KYMA_NAME_LABEL];
  if (forKyma === kyma || (forKyma === undefined && forEveryKyma)) return undefined;
  if (forEveryKyma) return `${what} is labelled for Kyma ${forKyma}, not for ${kyma}`;
  const other = forKyma === undefined ? 'no Kyma' : `Kyma ${forKyma}`;
  return `${what} is labelled for ${other}, not for ${kyma}: it needs the label ${KYMA_NAME_LABEL}=${kyma}`;
}

/**
 * dataFromRefusal: values by reference go only into a v1 Secret that has no data or
 * stringData of its own and no subresource; says why not, or undefined.
 */
export function dataFromRefusal(
  object: Record<string, unknown> | undefined,
  hasSubresource: boolean,
): string | undefined {
  if (!object) return 'dataFrom needs a resource (a v1 Secret)';
  if (object.apiVersion !== 'v1' || object.kind !== 'Secret')
    return `dataFrom is allowed only on a v1 Secret, not on ${String(object.apiVersion)}/${String(object.kind)}`;
  for (const f of ['data', 'stringData']) {
    if (object[f] !== undefined)
      return `resource sets ${f}, but a Secret with dataFrom takes its data from the source Secret only; remove ${f}`;
  }
  if (hasSubresource) return 'an item with dataFrom takes no subresource';
  return undefined;
}

/** feedbackRefusal: feedback is never read from a Secret (its values would reach the status). */
export const feedbackRefusal = (kind: { apiVersion: string; kind: string }): string | undefined =>
  kind.apiVersion === 'v1' && kind.kind === 'Secret' ? 'feedback is never read from a Secret' : undefined;

/** secretValues are what redacted hides of a source Secret's data: each value as stored (base64) and decoded, if 4 characters or more. */
export const secretValues = (data: Record<string, string>): string[] =>
  Object.values(data)
    .flatMap((v) => [v, Buffer.from(v, 'base64').toString('utf8')])
    .filter((v) => v.length >= 4);

/** Redactable is the text of an item result that may quote what was sent. */
interface Redactable {
  message: string;
  health?: { message: string } | undefined;
  feedback?: { value?: string | undefined }[] | undefined;
}

/** redacted: no value of a source Secret leaves a run; API errors may quote what was sent, so every text of a result is cleaned. */
export function redacted<R extends Redactable>(r: R, secrets: readonly string[] | undefined): R {
  if (!secrets?.length) return r;
  const redact = (text: string) => secrets.reduce((t, v) => t.split(v).join('***'), text);
  return {
    ...r,
    message: redact(r.message),
    ...(r.health ? { health: { ...r.health, message: redact(r.health.message) } } : {}),
    ...(r.feedback
      ? {
          feedback: r.feedback.map((f) => ({
            ...f,
            ...(f.value !== undefined ? { value: redact(f.value) } : {}),
          })),
        }
      : {}),
  };
}
