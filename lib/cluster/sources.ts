// sources.ts reads the KCP Secrets whose data a v1 Secret item takes by reference
// (items[].dataFrom.secretRef). A source lives in the SyncResource's namespace and carries
// the labels sync-source="true" and kyma-name=<spec.kyma>: a team ships a Secret only to
// the Kyma it was labelled for, and never an access Secret (those never carry the
// sync-source label; cluster resolution ignores Secrets that do). Refusals name the
// Secret and the rule, never a value.
import { resourcePath } from '../kube/discovery.ts';
import { TerminalError } from '../kube/errors.ts';
import type { Cluster, KubeObject } from '../kube/objects.ts';
import { KYMA_NAME_LABEL, SYNC_SOURCE_LABEL } from '../model.ts';
import { secretInfo } from './resolve.ts';

/** SourceError is why a source Secret cannot be used: reason SecretSourceNotFound or SecretSourceRejected. */
export class SourceError extends TerminalError {}

/** SourceSecret is the part of a KCP Secret that a source check needs. */
export type SourceSecret = KubeObject & { data?: Record<string, string> | null };

/** readSource reads the Secret namespace/name (a list by name: the verb the Secret readers have), or undefined. */
export async function readSource(kcp: Cluster, namespace: string, name: string): Promise<SourceSecret | undefined> {
  const list = await kcp.client.call<{ items: SourceSecret[] | null }>('GET', resourcePath(secretInfo, namespace), {
    query: { fieldSelector: `metadata.name=${name}` },
  });
  return list.items?.find((s) => s.metadata.name === name);
}

/** sourceData checks that secret may ship to kyma and returns its data (base64, as stored). */
export function sourceData(secret: SourceSecret | undefined, namespace: string, name: string, kyma: string): Record<string, string> {
  const what = `Secret ${namespace}/${name}`;
  if (!secret) throw new SourceError(`${what} (dataFrom.secretRef) does not exist`, 'SecretSourceNotFound');
  const labels = secret.metadata.labels ?? {};
  if (labels[SYNC_SOURCE_LABEL] !== 'true') {
    throw new SourceError(`${what} is not a sync source: it needs the label ${SYNC_SOURCE_LABEL}="true"`, 'SecretSourceRejected');
  }
  if (labels[KYMA_NAME_LABEL] !== kyma) {
    const other = labels[KYMA_NAME_LABEL] === undefined ? 'no Kyma' : `Kyma ${labels[KYMA_NAME_LABEL]}`;
    throw new SourceError(`${what} is labelled for ${other}, not for ${kyma}: it needs the label ${KYMA_NAME_LABEL}=${kyma}`, 'SecretSourceRejected');
  }
  if (secret.metadata.deletionTimestamp) throw new SourceError(`${what} is being deleted`, 'SecretSourceNotFound');
  return { ...secret.data };
}
