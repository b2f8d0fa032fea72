// sources.ts reads the KCP Secrets whose data a v1 Secret item takes by reference
// (items[].dataFrom.secretRef). A source lives in the SyncResource's namespace and carries
// the labels sync-source="true" and kyma-name=<spec.kyma>: a team ships a Secret only to
// the Kyma it was labelled for, and never an access Secret (those never carry the
// sync-source label; cluster resolution ignores Secrets that do). Refusals name the
// Secret and the rule, never a value.
import { gunzipSync } from 'node:zlib';
import { resourcePath, type ResourceInfo } from '../kube/discovery.ts';
import { TerminalError } from '../kube/errors.ts';
import type { Cluster, KubeObject } from '../kube/objects.ts';
import { sourceRefusal } from '../policy/rules.ts';

/** SourceError is why a source Secret cannot be used: reason SecretSourceNotFound or SecretSourceRejected. */
export class SourceError extends TerminalError<
  | 'SecretSourceNotFound'
  | 'SecretSourceRejected'
  | 'ResourceSourceNotFound'
  | 'ResourceSourceRejected'
  | 'ResourceSourceTooLarge'
> {}

/** SourceSecret is the part of a KCP Secret that a source check needs. */
export type SourceSecret = KubeObject & { data?: Record<string, string> | null };

/** readSource reads the Secret or ConfigMap namespace/name of info (a list by name: the verb the source readers have), or undefined. */
export async function readSource<T extends KubeObject>(
  kcp: Cluster,
  info: ResourceInfo,
  namespace: string,
  name: string,
): Promise<T | undefined> {
  const list = await kcp.client.call<{ items: T[] | null }>('GET', resourcePath(info, namespace), {
    query: { fieldSelector: `metadata.name=${name}` },
  });
  return list.items?.find((o) => o.metadata.name === name);
}

/** sourceData checks that secret may ship to kyma and returns its data (base64, as stored). */
export function sourceData(
  secret: SourceSecret | undefined,
  namespace: string,
  name: string,
  kyma: string,
): Record<string, string> {
  const what = `Secret ${namespace}/${name}`;
  if (!secret) throw new SourceError(`${what} (dataFrom.secretRef) does not exist`, 'SecretSourceNotFound');
  const refused = sourceRefusal(what, secret.metadata.labels, kyma, false);
  if (refused) throw new SourceError(refused, 'SecretSourceRejected');
  if (secret.metadata.deletionTimestamp)
    throw new SourceError(`${what} is being deleted`, 'SecretSourceNotFound');
  return { ...secret.data };
}

/** configMapInfo is the REST mapping of v1 ConfigMaps. */
export const configMapInfo: ResourceInfo = {
  apiVersion: 'v1',
  kind: 'ConfigMap',
  resource: 'configmaps',
  namespaced: true,
  hasStatus: false,
};

/** SourceConfigMap is the part of a KCP ConfigMap that a resourceFrom item needs. */
export type SourceConfigMap = KubeObject & {
  data?: Record<string, string> | null;
  binaryData?: Record<string, string> | null;
};

/**
 * resourceText checks that configMap may give an item of kyma its text and returns the
 * text of key: from data, or from binaryData as text or gzip-compressed text, at most
 * maxBytes once decompressed (a bomb stops at the limit). A ConfigMap labelled for a
 * Kyma serves only that Kyma; one without the label serves every Kyma of its namespace
 * (a large CRD is the same for all).
 */
export function resourceText(
  configMap: SourceConfigMap | undefined,
  namespace: string,
  name: string,
  key: string,
  kyma: string,
  maxBytes: number,
): string {
  const what = `ConfigMap ${namespace}/${name}`;
  if (!configMap || configMap.metadata.deletionTimestamp) {
    throw new SourceError(`${what} (resourceFrom.configMapKeyRef) does not exist`, 'ResourceSourceNotFound');
  }
  const refused = sourceRefusal(what, configMap.metadata.labels, kyma, true);
  if (refused) throw new SourceError(refused, 'ResourceSourceRejected');
  const tooLarge = (n: number | string) =>
    new SourceError(
      `${what} key ${key} is ${n} bytes, over the limit of ${maxBytes}`,
      'ResourceSourceTooLarge',
    );
  const text = configMap.data?.[key];
  if (text !== undefined) {
    const bytes = Buffer.byteLength(text, 'utf8');
    if (bytes > maxBytes) throw tooLarge(bytes);
    return text;
  }
  const binary = configMap.binaryData?.[key];
  if (binary === undefined)
    throw new SourceError(`${what} has no key ${key} in data or binaryData`, 'ResourceSourceNotFound');
  const raw = Buffer.from(binary, 'base64');
  if (raw[0] !== 0x1f || raw[1] !== 0x8b) {
    if (raw.length > maxBytes) throw tooLarge(raw.length);
    return raw.toString('utf8');
  }
  try {
    return gunzipSync(raw, { maxOutputLength: maxBytes }).toString('utf8');
  } catch (err) {
    if ((err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') throw tooLarge(`more than ${maxBytes}`);
    throw new SourceError(
      `${what} key ${key} is not valid gzip: ${(err as Error).message}`,
      'ResourceSourceRejected',
    );
  }
}
