// kcp-setup.ts installs into a local KCP what the product expects there: the
// SyncResource and Kyma CRDs, the control-plane namespace, and for each SKR a Kyma
// plus its access Secret (lifecycle-manager's label convention, key "config").
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { load, loadAll } from 'js-yaml';
import { KubeClient, type ClientOptions } from '../lib/kube/client.ts';
import { credentialsFromKubeconfig } from '../lib/kube/credentials.ts';
import { RestMapper } from '../lib/kube/discovery.ts';
import { applyObject, getObject, mustFind, type Cluster, type KubeObject } from '../lib/kube/objects.ts';
import type { ClusterSet } from './clusters.ts';
import { waitFor } from './net.ts';

/** crdDir holds the CRDs the project writes itself for local use (Kyma). */
export const crdDir = join(import.meta.dirname, 'crds');

/** knativeYaml is the deployment manifest; the SyncResource CRD is taken from it. */
export const knativeYaml = join(import.meta.dirname, '..', 'knative.yaml');

/** productCrds returns the CRD documents of knative.yaml (SyncResource, SyncPolicy). */
export async function productCrds(): Promise<KubeObject[]> {
  const docs = loadAll(await readFile(knativeYaml, 'utf8')) as KubeObject[];
  const crds = docs.filter((d) => d?.kind === 'CustomResourceDefinition');
  if (crds.length === 0) throw new Error(`${knativeYaml} holds no CRD`);
  return crds;
}

/** controlPlaneNamespace is where Kymas, access Secrets and SyncResources live locally. */
export const controlPlaneNamespace = 'kcp-system';

/** kymaNameLabel links an access Secret (and a SyncResource) to its Kyma. */
export const kymaNameLabel = 'operator.kyma-project.io/kyma-name';

const fieldManager = 'kcp-sync-local-setup';

/** connect makes an engine-grade client for kubeconfig text (the caller closes it). */
export async function connect(
  kubeconfig: string,
  name: string,
  hooks: Pick<ClientOptions, 'onRequest'> = {},
): Promise<Cluster> {
  const client = KubeClient.create(credentialsFromKubeconfig(kubeconfig), {
    name,
    qps: 1000,
    burst: 1000,
    ...hooks,
  });
  return { client, mapper: new RestMapper(client, { missTtlMs: 0 }) };
}

/** applyObjects server-side-applies objects in order. */
export async function applyObjects(c: Cluster, objects: KubeObject[]): Promise<void> {
  for (const obj of objects) {
    await applyObject(c, await mustFind(c, obj.apiVersion, obj.kind), obj, fieldManager);
  }
}

/**
 * installCrds applies CRDs (objects or file paths) and waits until each is established and
 * discovery serves its kind in every served version (discovery follows the establishment a
 * moment later: an apply of a custom resource right after could find no such kind).
 */
export async function installCrds(c: Cluster, sources: (string | KubeObject)[]): Promise<void> {
  const crds = await Promise.all(
    sources.map(async (f) => (typeof f === 'string' ? (load(await readFile(f, 'utf8')) as KubeObject) : f)),
  );
  await applyObjects(c, crds);
  const info = await mustFind(c, 'apiextensions.k8s.io/v1', 'CustomResourceDefinition');
  await Promise.all(
    crds.map((crd) =>
      waitFor(
        `CRD ${crd.metadata.name}`,
        async () => {
          const got = (await getObject(c, info, undefined, crd.metadata.name)) as
            { status?: { conditions?: { type: string; status: string }[] } } | undefined;
          if (!got?.status?.conditions?.some((x) => x.type === 'Established' && x.status === 'True'))
            return false;
          const { group, names, versions } = crd.spec as {
            group: string;
            names: { kind: string };
            versions: { name: string; served: boolean }[];
          };
          const found = await Promise.all(
            versions.filter((v) => v.served).map((v) => c.mapper.find(`${group}/${v.name}`, names.kind)),
          );
          return found.every((x) => x !== undefined);
        },
        30_000,
      ),
    ),
  );
}

/** kymaName is the Kyma that stands for SKR number i (1-based). */
export const kymaName = (i: number): string => `kyma-${i}`;

/** accessSecretName is the name of the access Secret of a Kyma in the local setup. */
export const accessSecretName = (kyma: string): string => `${kyma}-kubeconfig`;

/** kymaObjects returns the Kyma and its access Secret for one SKR kubeconfig. */
export function kymaObjects(
  kyma: string,
  kubeconfig: string,
  namespace = controlPlaneNamespace,
): KubeObject[] {
  return [
    {
      apiVersion: 'operator.kyma-project.io/v1beta2',
      kind: 'Kyma',
      metadata: { name: kyma, namespace },
      spec: { channel: 'regular' },
    },
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: accessSecretName(kyma), namespace, labels: { [kymaNameLabel]: kyma } },
      type: 'Opaque',
      stringData: { config: kubeconfig },
    },
  ];
}

/** setupKcp prepares a fresh local KCP for the product. */
export async function setupKcp(set: ClusterSet): Promise<void> {
  const kcp = await connect(set.kcp.kubeconfig, 'kcp');
  try {
    await installCrds(kcp, [...(await productCrds()), join(crdDir, 'kyma.yaml')]);
    await applyObjects(kcp, [
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: controlPlaneNamespace } },
      ...set.skrs.flatMap((skr, i) => kymaObjects(kymaName(i + 1), skr.kubeconfig)),
    ]);
  } finally {
    await kcp.client.close();
  }
}
