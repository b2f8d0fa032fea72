// workload.ts: the objects the benchmarks sync: SyncResources of 5 mixed items
// (two ConfigMaps, a Deployment, a Service, a custom resource with a status subresource).
// Two of the five are written in a form the API server stores differently (an empty map
// it drops, quantities it normalizes), as real module manifests are: drift must not be
// decided on the text.
import type { KubeObject } from '../lib/kube/objects.ts';
import type { SyncResource } from '../lib/model.ts';

/** conditionTrue tells whether the condition of type is True among conds (a SyncResource's or a ManagedResource's). */
export const conditionTrue = (conds: { type: string; status: string }[] | undefined, type: string): boolean =>
  conds?.some((c) => c.type === type && c.status === 'True') === true;

const current = (s: SyncResource) => s.status?.observedGeneration === s.metadata.generation;

/** readyAt: Ready at its generation (every item applied and every object working). */
export const readyAt = (s: SyncResource): boolean => current(s) && s.status?.state === 'Ready';

/** appliedAt: every item applied at its generation (its Resources condition, as GRM's ResourcesApplied). */
export const appliedAt = (s: SyncResource): boolean =>
  current(s) && conditionTrue(s.status?.conditions, 'Resources');

/** BENCH_GROUP is the API group of the benchmark's custom resource. */
export const BENCH_GROUP = 'bench.kcp-sync.io';

/** benchCrd is the CRD installed in every SKR before the runs. */
export const benchCrd: KubeObject = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: `widgets.${BENCH_GROUP}` },
  spec: {
    group: BENCH_GROUP,
    scope: 'Namespaced',
    names: { kind: 'Widget', listKind: 'WidgetList', plural: 'widgets', singular: 'widget' },
    versions: [
      {
        name: 'v1',
        served: true,
        storage: true,
        subresources: { status: {} },
        schema: {
          openAPIV3Schema: {
            type: 'object',
            properties: {
              spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
              status: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
            },
          },
        },
      },
    ],
  },
};

/** objectsFor returns the 5 objects of SyncResource i (namespace ns in the SKR). */
/** DIRECT_CONCURRENCIES are the direct loop's concurrencies (scenario 2); the best one is its time. */
export const DIRECT_CONCURRENCIES = [8, 16, 32, 64];

/** directNamespace is the SKR namespace the direct loop creates its objects in at concurrency c: new objects at each, as the bulk create's are. */
export const directNamespace = (c: number) => `direct-${c}`;

export function objectsFor(i: number, ns: string, rev = 1): { objects: KubeObject[]; status: KubeObject } {
  const n = `b${i}`;
  const objects: KubeObject[] = [
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: `${n}-a`, namespace: ns },
      data: { rev: String(rev), k: 'v'.repeat(64) },
    },
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: `${n}-b`, namespace: ns, annotations: {} },
      data: { rev: String(rev) },
      binaryData: {},
    },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: n, namespace: ns },
      spec: {
        replicas: 0,
        selector: { matchLabels: { app: n } },
        template: {
          metadata: { labels: { app: n } },
          spec: {
            containers: [
              {
                name: 'c',
                image: 'nginx:1.27',
                resources: {
                  requests: { cpu: 0.1, memory: 134217728 },
                  limits: { cpu: '1000m', memory: '1024Mi' },
                },
              },
            ],
          },
        },
      },
    },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: n, namespace: ns },
      spec: { selector: { app: n }, ports: [{ port: 80 }] },
    },
    {
      apiVersion: `${BENCH_GROUP}/v1`,
      kind: 'Widget',
      metadata: { name: n, namespace: ns },
      spec: { size: rev },
    },
  ];
  const status = {
    apiVersion: `${BENCH_GROUP}/v1`,
    kind: 'Widget',
    metadata: { name: n, namespace: ns },
    status: { state: 'Ready' },
  };
  return { objects, status };
}

const yaml = (o: unknown) => JSON.stringify(o);

/** itemsOf renders objects as SyncResource items (CreateAndSync), status as the Widget's subresource. */
export function itemsOf(objects: KubeObject[], status?: KubeObject): Record<string, string>[] {
  return objects.map((o, j) => ({
    name: `item-${j}`,
    strategy: 'CreateAndSync',
    resource: yaml(o),
    ...(status && o.kind === status.kind ? { subresource: yaml(status) } : {}),
  }));
}

/** syncResourceFor renders SyncResource i targeting kyma. */
export function syncResourceFor(i: number, ns: string, kcpNs: string, kyma: string, rev = 1): KubeObject {
  const { objects, status } = objectsFor(i, ns, rev);
  return {
    apiVersion: 'operator.kyma-project.io/v1alpha1',
    kind: 'SyncResource',
    metadata: { name: `bench-${i}`, namespace: kcpNs },
    spec: { kyma, items: itemsOf(objects, status) },
  };
}
