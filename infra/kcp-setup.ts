// kcp-setup.ts installs into a local KCP what the product expects there: the
// SyncResource and Kyma CRDs, the control-plane namespace, and for each SKR a Kyma
// plus its access Secret (lifecycle-manager's label convention, key "config").
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  ApiextensionsV1Api, KubeConfig, KubernetesObjectApi, PatchStrategy, type KubernetesObject,
} from '@kubernetes/client-node';
import { load } from 'js-yaml';
import type { ClusterSet } from './clusters.ts';
import { waitFor } from './net.ts';

/** crdDir holds the CRDs the project writes itself. */
export const crdDir = join(import.meta.dirname, 'crds');

/** controlPlaneNamespace is where Kymas, access Secrets and SyncResources live locally. */
export const controlPlaneNamespace = 'kcp-system';

/** kymaNameLabel links an access Secret (and a SyncResource) to its Kyma. */
export const kymaNameLabel = 'operator.kyma-project.io/kyma-name';

const fieldManager = 'kcp-sync-local-setup';

/** applyObjects server-side-applies objects in order. */
export async function applyObjects(kc: KubeConfig, objects: KubernetesObject[]): Promise<void> {
  const api = KubernetesObjectApi.makeApiClient(kc);
  for (const obj of objects) {
    await api.patch(obj, undefined, undefined, fieldManager, true, PatchStrategy.ServerSideApply);
  }
}

/** installCrds applies CRD files and waits until each is established. */
export async function installCrds(kc: KubeConfig, files: string[]): Promise<void> {
  const crds = await Promise.all(files.map(async (f) => load(await readFile(f, 'utf8')) as KubernetesObject));
  await applyObjects(kc, crds);
  const ext = kc.makeApiClient(ApiextensionsV1Api);
  await Promise.all(crds.map((crd) => waitFor(`CRD ${crd.metadata?.name}`, async () => {
    const got = await ext.readCustomResourceDefinition({ name: crd.metadata!.name! });
    return got.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') ?? false;
  }, 30_000)));
}

/** kymaName is the Kyma that stands for SKR number i (1-based). */
export const kymaName = (i: number): string => `kyma-${i}`;

/** accessSecretName is the name of the access Secret of a Kyma in the local setup. */
export const accessSecretName = (kyma: string): string => `${kyma}-kubeconfig`;

/** kymaObjects returns the Kyma and its access Secret for one SKR kubeconfig. */
export function kymaObjects(kyma: string, kubeconfig: string, namespace = controlPlaneNamespace): KubernetesObject[] {
  return [
    {
      apiVersion: 'operator.kyma-project.io/v1beta2', kind: 'Kyma',
      metadata: { name: kyma, namespace },
      spec: { channel: 'regular' },
    } as KubernetesObject,
    {
      apiVersion: 'v1', kind: 'Secret',
      metadata: { name: accessSecretName(kyma), namespace, labels: { [kymaNameLabel]: kyma } },
      type: 'Opaque',
      stringData: { config: kubeconfig },
    } as KubernetesObject,
  ];
}

/** setupKcp prepares a fresh local KCP for the product. */
export async function setupKcp(set: ClusterSet): Promise<void> {
  const kc = new KubeConfig();
  kc.loadFromString(set.kcp.kubeconfig);
  await installCrds(kc, [join(crdDir, 'syncresource.yaml'), join(crdDir, 'kyma.yaml')]);
  await applyObjects(kc, [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: controlPlaneNamespace } },
    ...set.skrs.flatMap((skr, i) => kymaObjects(kymaName(i + 1), skr.kubeconfig)),
  ]);
}
