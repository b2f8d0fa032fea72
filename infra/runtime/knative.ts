// knative.ts reads knative.yaml into the routing the local runtime plays: broker
// delivery, triggers, sources and the function Services.
import { readFile } from 'node:fs/promises';
import { loadAll } from 'js-yaml';

/** Delivery is Knative's delivery spec (retries, backoff, dead letter). */
export interface Delivery {
  retry?: number;
  backoffPolicy?: 'exponential' | 'linear';
  backoffDelay?: string;
}

/** Filter is one expression of a Trigger's `filters` dialect. */
export type Filter = {
  exact?: Record<string, string>;
  prefix?: Record<string, string>;
  suffix?: Record<string, string>;
  all?: Filter[];
  any?: Filter[];
  not?: Filter;
};

/** Trigger routes matching events from the broker to a subscriber Service. */
export interface Trigger {
  name: string;
  attributes?: Record<string, string>;
  filters?: Filter[];
  subscriber: string;
  delivery?: Delivery;
}

/** ApiServerResource is one watched kind of an ApiServerSource. */
export interface ApiServerResource {
  apiVersion: string;
  kind: string;
  labelSelector?: string;
}

/** Routing is everything the runtime takes from knative.yaml. */
export interface Routing {
  namespace: string;
  broker: { name: string; delivery: Delivery };
  triggers: Trigger[];
  apiServerSources: {
    name: string;
    resources: ApiServerResource[];
    serviceAccountName?: string;
    mode?: string;
  }[];
  pingSources: { name: string; schedule: string; data?: string; contentType?: string }[];
  /** services are the function Services; concurrency is their containerConcurrency (0: unlimited), timeoutMs their timeoutSeconds (Knative's default 300 s). */
  services: {
    name: string;
    env: Record<string, string>;
    /** annotations and labels are the Revision template's (its Pods'). */
    annotations: Record<string, string>;
    labels: Record<string, string>;
    concurrency: number;
    timeoutMs: number;
    serviceAccountName?: string;
  }[];
  /**
   * deployments are the product's own long-running adapters (the SKR source): the args of
   * their command after "node", the env values (fieldRefs: fields, by path), replicas.
   */
  deployments: {
    name: string;
    args: string[];
    env: Record<string, string>;
    fields: Record<string, string>;
    replicas: number;
    serviceAccountName?: string;
  }[];
  /** rbac holds the ServiceAccounts, Roles and RoleBindings of the file, as written. */
  rbac: Doc[];
}

/** Doc is one document of knative.yaml. */
export type Doc = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
  spec: Record<string, any>;
};

/** selector renders a label selector (matchLabels, matchExpressions) as a query's labelSelector. */
export function selector(
  sel:
    | {
        matchLabels?: Record<string, string>;
        matchExpressions?: { key: string; operator: string; values?: string[] }[];
      }
    | undefined,
): string | undefined {
  if (!sel) return undefined;
  const parts = Object.entries(sel.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`);
  for (const e of sel.matchExpressions ?? []) {
    if (e.operator === 'Exists') parts.push(e.key);
    else if (e.operator === 'DoesNotExist') parts.push(`!${e.key}`);
    else parts.push(`${e.key} ${e.operator === 'In' ? 'in' : 'notin'} (${(e.values ?? []).join(',')})`);
  }
  return parts.join(',') || undefined;
}

/** loadRouting parses knative.yaml. */
export async function loadRouting(file: string): Promise<Routing> {
  const docs = (loadAll(await readFile(file, 'utf8')) as Doc[]).filter(Boolean);
  const brokers = docs.filter((d) => d.kind === 'Broker');
  if (brokers.length !== 1) throw new Error(`${file}: expected exactly one Broker, found ${brokers.length}`);
  const broker = brokers[0]!;
  return {
    namespace: broker.metadata.namespace ?? 'default',
    broker: { name: broker.metadata.name, delivery: broker.spec?.delivery ?? {} },
    triggers: docs
      .filter((d) => d.kind === 'Trigger')
      .map((t) => ({
        name: t.metadata.name,
        attributes: t.spec.filter?.attributes,
        filters: t.spec.filters,
        subscriber: t.spec.subscriber.ref.name,
        delivery: t.spec.delivery,
      })),
    apiServerSources: docs
      .filter((d) => d.kind === 'ApiServerSource')
      .map((s) => ({
        name: s.metadata.name,
        resources: s.spec.resources.map((r: { apiVersion: string; kind: string; selector?: never }) => ({
          apiVersion: r.apiVersion,
          kind: r.kind,
          labelSelector: selector(r.selector),
        })),
        ...(s.spec.serviceAccountName ? { serviceAccountName: s.spec.serviceAccountName as string } : {}),
        ...(s.spec.mode ? { mode: s.spec.mode as string } : {}),
      })),
    pingSources: docs
      .filter((d) => d.kind === 'PingSource')
      .map((p) => ({
        name: p.metadata.name,
        schedule: p.spec.schedule,
        data: p.spec.data,
        contentType: p.spec.contentType,
      })),
    services: docs
      .filter((d) => d.kind === 'Service' && d.apiVersion === 'serving.knative.dev/v1')
      .map((s) => ({
        name: s.metadata.name,
        env: Object.fromEntries(
          (s.spec.template.spec.containers[0].env ?? []).map((e: { name: string; value: string }) => [
            e.name,
            e.value,
          ]),
        ),
        annotations: (s.spec.template.metadata?.annotations ?? {}) as Record<string, string>,
        labels: (s.spec.template.metadata?.labels ?? {}) as Record<string, string>,
        concurrency: Number(s.spec.template.spec.containerConcurrency ?? 0),
        timeoutMs: Number(s.spec.template.spec.timeoutSeconds ?? 300) * 1000,
        ...(s.spec.template.spec.serviceAccountName
          ? { serviceAccountName: s.spec.template.spec.serviceAccountName as string }
          : {}),
      })),
    deployments: docs
      .filter((d) => d.kind === 'Deployment' && d.apiVersion === 'apps/v1')
      .map((d) => {
        const pod = d.spec.template.spec;
        const c = pod.containers[0];
        type Env = { name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } };
        const env: Env[] = c.env ?? [];
        return {
          name: d.metadata.name,
          args: (c.command ?? []).slice(1),
          env: Object.fromEntries(env.filter((e) => e.value !== undefined).map((e) => [e.name, e.value!])),
          fields: Object.fromEntries(
            env.filter((e) => e.valueFrom?.fieldRef).map((e) => [e.name, e.valueFrom!.fieldRef!.fieldPath]),
          ),
          replicas: Number(d.spec.replicas ?? 1),
          ...(pod.serviceAccountName ? { serviceAccountName: pod.serviceAccountName as string } : {}),
        };
      }),
    rbac: docs.filter((d) =>
      ['ServiceAccount', 'Role', 'RoleBinding', 'ClusterRole', 'ClusterRoleBinding'].includes(d.kind),
    ),
  };
}

/** isoDurationMs converts an ISO 8601 duration such as PT0.5S or PT1M to milliseconds. */
export function isoDurationMs(d: string): number {
  const m = /^PT(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?$/.exec(d);
  if (!m) throw new Error(`unsupported duration ${d}`);
  return ((Number(m[1] ?? 0) * 60 + Number(m[2] ?? 0)) * 60 + Number(m[3] ?? 0)) * 1000;
}

/** cronIntervalMs understands the schedules PingSource is used with here: every N minutes, every N seconds (a seconds field). */
export function cronIntervalMs(schedule: string): number {
  const m = /^\*\/(\d+) \* \* \* \*$/.exec(schedule.trim());
  if (m) return Number(m[1]) * 60_000;
  if (schedule.trim() === '* * * * *') return 60_000;
  const sec = /^\*\/(\d+) \* \* \* \* \*$/.exec(schedule.trim());
  if (sec) return Number(sec[1]) * 1000;
  throw new Error(
    `unsupported schedule "${schedule}" (use */N * * * *, */N * * * * * or set a local interval)`,
  );
}

/** pingSchedule is a PingSource's local period: its own schedule unless pingIntervalMs is given. */
export function pingSchedule(
  p: { schedule: string; data?: string },
  opts: { pingIntervalMs?: number },
): { intervalMs: number; data?: string } {
  return {
    intervalMs: opts.pingIntervalMs ?? cronIntervalMs(p.schedule),
    ...(p.data !== undefined ? { data: p.data } : {}),
  };
}
