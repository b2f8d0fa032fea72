// eventing.ts installs Knative Eventing into the KCP from Knative's own configuration (as
// released with knative.dev/eventing, copied by infra/knative/build.sh): the core
// (eventing controller, PingSource adapter, CRDs, ConfigMaps, RBAC), the in-memory channel
// (controller and dispatcher) and the channel-based broker (controller, ingress, filter),
// plus Serving's CRDs (infra/serving). The kubelet (kubelet.ts) runs their Deployments.
// The eventing webhook runs for its SinkBinding reconciler (it gives the functions K_SINK);
// its admission webhooks are not registered (the API server cannot reach a Pod here), so
// knative.yaml sets what they would default. Left out: the autoscalers, job sink and
// request-reply.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { loadAll } from 'js-yaml';
import { resourcePath } from '../../lib/kube/discovery.ts';
import { listObjects, mustFind, type Cluster, type KubeObject } from '../../lib/kube/objects.ts';
import { applyObjects, installCrds } from '../kcp-setup.ts';
import { waitFor } from '../net.ts';
import { selector } from './knative.ts';

/** EVENTING_NAMESPACE is where Knative Eventing's own parts run. */
export const EVENTING_NAMESPACE = 'knative-eventing';

const left = new Set([
  'HorizontalPodAutoscaler',
  'PodDisruptionBudget',
  'MutatingWebhookConfiguration',
  'ValidatingWebhookConfiguration',
]);

async function docsIn(dir: string, files?: string[]): Promise<KubeObject[]> {
  const names = files ?? (await readdir(dir)).filter((f) => f.endsWith('.yaml')).sort();
  const out: KubeObject[] = [];
  for (const f of names)
    out.push(
      ...(loadAll(await readFile(join(dir, f), 'utf8')) as (KubeObject | null)[]).filter(
        (d): d is KubeObject => !!d && !left.has(d.kind),
      ),
    );
  return out;
}

/** eventingObjects reads the parts of Knative's configuration the local KCP runs. */
export async function eventingObjects(config: string): Promise<KubeObject[]> {
  const core = join(config, 'core');
  const imc = join(config, 'channels', 'in-memory-channel');
  const mt = join(config, 'brokers', 'mt-channel-broker');
  return [
    ...(await docsIn(core, [
      '100-namespace.yaml',
      '200-eventing-serviceaccount.yaml',
      '200-pingsource-mt-adapter-serviceaccount.yaml',
      '200-webhook-serviceaccount.yaml',
    ])),
    // The webhook's certificate Secret (it fills it); the webhook configurations are left out.
    ...(await docsIn(join(core, 'webhooks'), ['secret.yaml'])),
    ...(await docsIn(join(core, 'resources'))),
    ...(await docsIn(join(core, 'configmaps'))),
    ...(await docsIn(join(core, 'roles'))),
    ...(await docsIn(imc, [
      '200-imc-controller-serviceaccount.yaml',
      '200-imc-dispatcher-serviceaccount.yaml',
    ])),
    ...(await docsIn(join(imc, 'resources'))),
    ...(await docsIn(join(imc, 'configmaps'))),
    ...(await docsIn(join(imc, 'roles'))),
    ...(await docsIn(join(mt, 'roles'))),
    // The images the eventing controller reads for features not used here (the release
    // generates these two ConfigMaps; its Pod cannot start without them).
    ...(['eventing-integrations-images', 'eventing-transformations-images'].map((name) => ({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name, namespace: EVENTING_NAMESPACE },
      data: {},
    })) as KubeObject[]),
    ...(await docsIn(join(core, 'deployments'), [
      'controller.yaml',
      'pingsource-mt-adapter.yaml',
      'webhook.yaml',
    ])),
    ...(await docsIn(join(imc, 'deployments'), [
      'controller.yaml',
      'dispatcher.yaml',
      'dispatcher-service.yaml',
    ])),
    ...(await docsIn(join(mt, 'deployments'), [
      'controller.yaml',
      'broker-filter.yaml',
      'broker-ingress.yaml',
    ])),
  ];
}

/**
 * installEventing applies Serving's CRDs and Knative Eventing's configuration to the KCP.
 * oidc turns on sender identity (config-features authentication-oidc): sources, Triggers
 * and the broker's parts attach OIDC tokens, and the broker ingress verifies them and
 * applies EventPolicies.
 */
export async function installEventing(
  kcp: Cluster,
  eventingConfig: string,
  servingConfig: string,
  opts: { oidc?: boolean } = {},
): Promise<void> {
  const objects = await eventingObjects(eventingConfig);
  const features = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'config-features');
  if (opts.oidc && features) (features.data as Record<string, string>)['authentication-oidc'] = 'enabled';
  // The controller's env names keys of the two images ConfigMaps: give each key a value.
  const controller = objects.find(
    (o) => o.kind === 'Deployment' && o.metadata.name === 'eventing-controller',
  ) as
    | {
        spec: {
          template: {
            spec: {
              containers: { env?: { valueFrom?: { configMapKeyRef?: { name: string; key: string } } }[] }[];
            };
          };
        };
      }
    | undefined;
  for (const e of controller?.spec.template.spec.containers[0]?.env ?? []) {
    const ref = e.valueFrom?.configMapKeyRef;
    const cm =
      ref &&
      objects.find(
        (o) =>
          o.kind === 'ConfigMap' &&
          o.metadata.name === ref.name &&
          o.metadata.namespace === EVENTING_NAMESPACE,
      );
    if (ref && cm && cm.data !== undefined && !(ref.key in (cm.data as object)))
      (cm.data as Record<string, string>)[ref.key] = `not-built-here/${ref.key}`;
  }
  const crds = [
    ...objects.filter((o) => o.kind === 'CustomResourceDefinition'),
    ...(await docsIn(servingConfig)),
  ];
  await installCrds(kcp, crds);
  await applyObjects(
    kcp,
    objects.filter((o) => o.kind === 'Namespace'),
  );
  await applyObjects(kcp, [
    ...objects.filter((o) => o.kind !== 'CustomResourceDefinition' && o.kind !== 'Namespace'),
    ...(await docsIn(join(servingConfig, 'roles'))),
  ]);
}

type Conditioned = {
  metadata: { name: string; generation?: number };
  status?: {
    observedGeneration?: number;
    conditions?: { type: string; status: string; reason?: string; message?: string }[];
  };
};

/** notReady names the objects of a list whose Ready condition is not True for their generation. */
export async function notReady(kcp: Cluster, path: string): Promise<string[]> {
  const list = await kcp.client.call<{ items: Conditioned[] }>('GET', path);
  return list.items
    .filter((o) => {
      const ready = o.status?.conditions?.find((c) => c.type === 'Ready');
      return ready?.status !== 'True' || (o.status?.observedGeneration ?? 0) < (o.metadata.generation ?? 0);
    })
    .map((o) => {
      const ready = o.status?.conditions?.find((c) => c.type === 'Ready');
      return `${o.metadata.name}${ready?.message ? ` (${ready.reason ?? ''}: ${ready.message})` : ''}`;
    });
}

type Template = {
  containers?: { env?: { name: string; value?: string }[] }[];
  volumes?: { name: string; projected?: { sources?: { secret?: { name?: string } }[] } }[];
};
type Subject = { metadata: { name: string }; spec?: { template?: { spec?: Template } } };
type Binding = {
  metadata: { name: string };
  spec: {
    subject: {
      apiVersion: string;
      kind: string;
      name?: string;
      selector?: Parameters<typeof selector>[0];
    };
  };
  status?: { sinkUri?: string; oidcTokenSecretName?: string };
};

/**
 * unbound names the subjects of namespace's SinkBindings whose template does not yet carry
 * what the binding's status says (K_SINK, and the OIDC token volume once the binding has
 * its token Secret): eventing's webhook patches them a moment after the binding is Ready,
 * and each patch is a new Revision or ReplicaSet, which takes a function or the SKR source
 * down for a moment (sinkbinding_lifecycle.go Do).
 */
export async function unbound(kcp: Cluster, namespace: string): Promise<string[]> {
  const bindings = await kcp.client.call<{ items: Binding[] }>(
    'GET',
    `/apis/sources.knative.dev/v1/namespaces/${namespace}/sinkbindings`,
  );
  const out: string[] = [];
  for (const b of bindings.items) {
    const { subject } = b.spec;
    const info = await mustFind(kcp, subject.apiVersion, subject.kind);
    const subjects = subject.name
      ? [await kcp.client.call<Subject>('GET', resourcePath(info, namespace, subject.name))]
      : await listObjects<Subject>(kcp, info, { namespace, labelSelector: selector(subject.selector) });
    const sink = b.status?.sinkUri;
    const secret = b.status?.oidcTokenSecretName;
    for (const x of subjects) {
      const t = x.spec?.template?.spec;
      const bound =
        sink !== undefined &&
        (t?.containers ?? []).every((c) => c.env?.some((e) => e.name === 'K_SINK' && e.value === sink)) &&
        (secret === undefined ||
          (t?.volumes ?? []).some(
            (v) => v.name === 'oidc-token' && v.projected?.sources?.some((p) => p.secret?.name === secret),
          ));
      if (!bound) out.push(`${subject.kind} ${x.metadata.name} (SinkBinding ${b.metadata.name})`);
    }
  }
  return out;
}

/** waitEventingReady waits until the Broker, Triggers and sources of namespace are Ready, and every SinkBinding's subjects carry what it binds. */
export async function waitEventingReady(kcp: Cluster, namespace: string, timeoutMs = 180_000): Promise<void> {
  const paths = [
    'eventing.knative.dev/v1/namespaces/%/brokers',
    'eventing.knative.dev/v1/namespaces/%/triggers',
    'sources.knative.dev/v1/namespaces/%/apiserversources',
    'sources.knative.dev/v1/namespaces/%/pingsources',
    'sources.knative.dev/v1/namespaces/%/sinkbindings',
  ].map((p) => `/apis/${p.replace('%', namespace)}`);
  let waiting: string[] = [];
  await waitFor(
    'the Broker, Triggers and sources',
    async () => {
      waiting = (await Promise.all(paths.map((p) => notReady(kcp, p)))).flat();
      if (waiting.length === 0) waiting = await unbound(kcp, namespace);
      return waiting.length === 0;
    },
    timeoutMs,
    () => undefined,
  ).catch(async (err: unknown) => {
    const seen = await podsAndWarnings(kcp, namespace).catch((e: unknown) => `(not read: ${String(e)})`);
    throw new Error(`${String(err)}; not ready: ${waiting.join(', ')}; ${seen}`);
  });
}

/** podsAndWarnings says which Pods namespace has (phase, Node, Ready) and its last Warning events, for a start that failed. */
async function podsAndWarnings(kcp: Cluster, namespace: string): Promise<string> {
  type Pod = {
    metadata: { name: string };
    spec: { nodeName?: string };
    status?: { phase?: string; conditions?: { type: string; status: string }[] };
  };
  type Event = {
    metadata: { creationTimestamp?: string };
    lastTimestamp?: string;
    eventTime?: string;
    reason?: string;
    message?: string;
    involvedObject: { kind?: string; name?: string };
  };
  const [pods, events] = await Promise.all([
    kcp.client.call<{ items: Pod[] }>('GET', `/api/v1/namespaces/${namespace}/pods`),
    kcp.client.call<{ items: Event[] }>('GET', `/api/v1/namespaces/${namespace}/events`, {
      query: { fieldSelector: 'type=Warning' },
    }),
  ]);
  const pod = (p: Pod) =>
    `${p.metadata.name} (${p.status?.phase ?? 'no phase'}, node ${p.spec.nodeName ?? 'none'}, ready ${p.status?.conditions?.find((c) => c.type === 'Ready')?.status ?? 'unknown'})`;
  // A list comes in name order: the last are the latest by the time each was last seen.
  const seen = (e: Event) => e.lastTimestamp ?? e.eventTime ?? e.metadata.creationTimestamp ?? '';
  const latest = events.items.sort((a, b) => seen(a).localeCompare(seen(b))).slice(-5);
  const warning = (e: Event) =>
    `${e.involvedObject.kind}/${e.involvedObject.name}: ${e.reason}: ${e.message}`;
  return `Pods in ${namespace}: ${pods.items.map(pod).join(', ') || 'none'}; last warnings: ${latest.map(warning).join(' | ') || 'none'}`;
}
