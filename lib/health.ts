// health.ts tells whether a live SKR object works, not only that it was written: the rules
// of kstatus (sigs.k8s.io/cli-utils/pkg/kstatus/status, the library behind Flux's health
// checks), ported rule by rule from v0.37.2, plus Kyma's convention that a module CR's
// status.state is its health (as lifecycle-manager reads it), plus an item's own CEL rules
// (items[].health, as Flux's healthCheckExprs; health-rules.ts). Pure: the object and the clock in.
import type { KubeObject } from './kube/objects.ts';
import { bounded } from './policy/rules.ts';
import type { Health } from './model.ts';
import { evaluateRules, type CompiledRules } from './health-rules.ts';

/** describeHealth renders an object's health for messages and Events: "Deployment ns/x: ProgressDeadlineExceeded: Progress deadline exceeded". */
export const describeHealth = (object: string, h: Health): string =>
  [object, h.reason, h.message].filter(Boolean).join(': ');

type Obj = Record<string, unknown>;
type Cond = { type?: string; status?: string; reason?: string; message?: string };

const current = (message: string, reason?: string): Health => ({
  status: 'Current',
  message,
  ...(reason ? { reason } : {}),
});
const inProgress = (reason: string, message: string): Health => ({ status: 'InProgress', reason, message });
const failed = (reason: string, message: string): Health => ({ status: 'Failed', reason, message });

function field(o: unknown, path: string): unknown {
  let at: unknown = o;
  for (const k of path.split('.')) {
    if (at === null || typeof at !== 'object') return undefined;
    at = (at as Obj)[k];
  }
  return at;
}
const int = (o: KubeObject, path: string, dflt: number): number => {
  const v = field(o, path);
  return typeof v === 'number' && Number.isInteger(v) ? v : dflt;
};
const str = (o: KubeObject, path: string, dflt: string): string => {
  const v = field(o, path);
  return typeof v === 'string' ? v : dflt;
};
const conditions = (o: KubeObject): Cond[] => {
  const c = field(o, 'status.conditions');
  return Array.isArray(c) ? c.filter((x): x is Cond => x !== null && typeof x === 'object') : [];
};

/** notObserved is kstatus's checkGeneration: InProgress while status.observedGeneration is behind metadata.generation. */
function notObserved(o: KubeObject): Health | undefined {
  const generation = o.metadata.generation;
  const observed = field(o, 'status.observedGeneration');
  if (typeof generation === 'number' && typeof observed === 'number' && observed !== generation) {
    return inProgress(
      'LatestGenerationNotObserved',
      `${o.kind} generation is ${generation}, but latest observed generation is ${observed}`,
    );
  }
  return undefined;
}

/** generic are kstatus's checks for every kind: deletion, the latest generation observed, Reconciling and Stalled. */
function generic(o: KubeObject): Health | undefined {
  if (o.metadata.deletionTimestamp)
    return { status: 'Terminating', message: 'Resource scheduled for deletion' };
  const behind = notObserved(o);
  if (behind) return behind;
  for (const c of conditions(o)) {
    if (c.type === 'Reconciling' && c.status === 'True') return inProgress(c.reason ?? '', c.message ?? '');
    if (c.type === 'Stalled' && c.status === 'True') return failed(c.reason ?? '', c.message ?? '');
  }
  return undefined;
}

const always = () => current('Resource is always ready');

function deployment(o: KubeObject): Health {
  let progressing = int(o, 'spec.progressDeadlineSeconds', 2 ** 31 - 1) === 2 ** 31 - 1;
  let available = false;
  for (const c of conditions(o)) {
    if (c.type === 'Progressing') {
      if (c.reason === 'ProgressDeadlineExceeded')
        return failed('ProgressDeadlineExceeded', 'Progress deadline exceeded');
      if (c.status === 'True' && c.reason === 'NewReplicaSetAvailable') progressing = true;
    }
    if (c.type === 'Available' && c.status === 'True') available = true;
  }
  const spec = int(o, 'spec.replicas', 1);
  const replicas = int(o, 'status.replicas', 0);
  const updated = int(o, 'status.updatedReplicas', 0);
  const ready = int(o, 'status.readyReplicas', 0);
  const avail = int(o, 'status.availableReplicas', 0);
  if (spec > replicas) return inProgress('LessReplicas', `Replicas: ${replicas}/${spec}`);
  if (spec > updated) return inProgress('LessUpdated', `Updated: ${updated}/${spec}`);
  if (replicas > spec) return inProgress('ExtraPods', `Pending termination: ${replicas - spec}`);
  if (updated > avail) return inProgress('LessAvailable', `Available: ${avail}/${updated}`);
  if (spec > ready) return inProgress('LessReady', `Ready: ${ready}/${spec}`);
  if (!progressing) return inProgress('ReplicaSetNotAvailable', 'ReplicaSet not Available');
  if (!available) return inProgress('DeploymentNotAvailable', 'Deployment not Available');
  return current(`Deployment is available. Replicas: ${replicas}`);
}

function statefulSet(o: KubeObject): Health {
  if (str(o, 'spec.updateStrategy.type', '') === 'OnDelete')
    return current('StatefulSet is using the ondelete update strategy');
  const spec = int(o, 'spec.replicas', 1);
  const ready = int(o, 'status.readyReplicas', 0);
  const cur = int(o, 'status.currentReplicas', 0);
  const updated = int(o, 'status.updatedReplicas', 0);
  const replicas = int(o, 'status.replicas', 0);
  const partition = int(o, 'spec.updateStrategy.rollingUpdate.partition', -1);
  if (spec > replicas) return inProgress('LessReplicas', `Replicas: ${replicas}/${spec}`);
  if (spec > ready) return inProgress('LessReady', `Ready: ${ready}/${spec}`);
  if (replicas > spec) return inProgress('ExtraPods', `Pending termination: ${replicas - spec}`);
  if (partition !== -1) {
    if (updated < spec - partition)
      return inProgress('PartitionRollout', `updated: ${updated}/${spec - partition}`);
    return current(`Partition rollout complete. updated: ${updated}`);
  }
  if (spec > cur) return inProgress('LessCurrent', `current: ${cur}/${spec}`);
  if (str(o, 'status.currentRevision', '') !== str(o, 'status.updateRevision', '')) {
    return inProgress('RevisionMismatch', 'Waiting for updated revision to match current');
  }
  return current(`All replicas scheduled as expected. Replicas: ${replicas}`);
}

function daemonSet(o: KubeObject): Health {
  if (typeof o.metadata.generation !== 'number')
    return inProgress('NoGeneration', `${o.kind} metadata.generation not found`);
  if (typeof field(o, 'status.observedGeneration') !== 'number')
    return inProgress('NoObservedGeneration', `${o.kind} status.observedGeneration not found`);
  const desired = int(o, 'status.desiredNumberScheduled', -1);
  const scheduled = int(o, 'status.currentNumberScheduled', 0);
  const updated = int(o, 'status.updatedNumberScheduled', 0);
  const avail = int(o, 'status.numberAvailable', 0);
  const ready = int(o, 'status.numberReady', 0);
  if (desired === -1) return inProgress('NoDesiredNumber', 'Missing .status.desiredNumberScheduled');
  if (desired > scheduled) return inProgress('LessCurrent', `Current: ${scheduled}/${desired}`);
  if (desired > updated) return inProgress('LessUpdated', `Updated: ${updated}/${desired}`);
  if (desired > avail) return inProgress('LessAvailable', `Available: ${avail}/${desired}`);
  if (desired > ready) return inProgress('LessReady', `Ready: ${ready}/${desired}`);
  return current(`All replicas scheduled as expected. Replicas: ${desired}`);
}

function replicaSet(o: KubeObject): Health {
  if (conditions(o).some((c) => c.type === 'ReplicaFailure' && c.status === 'True')) {
    return inProgress('ReplicaFailure', 'Replica Failure condition. Check Pods');
  }
  const spec = int(o, 'spec.replicas', 1);
  const replicas = int(o, 'status.replicas', 0);
  const ready = int(o, 'status.readyReplicas', 0);
  const avail = int(o, 'status.availableReplicas', 0);
  const labelled = int(o, 'status.fullyLabeledReplicas', 0);
  if (spec > labelled) return inProgress('LessLabelled', `Labelled: ${labelled}/${spec}`);
  if (spec > avail) return inProgress('LessAvailable', `Available: ${avail}/${spec}`);
  if (spec > ready) return inProgress('LessReady', `Ready: ${ready}/${spec}`);
  if (replicas > spec) return inProgress('ExtraPods', `Pending termination: ${replicas - spec}`);
  return current(`ReplicaSet is available. Replicas: ${replicas}`);
}

function pvc(o: KubeObject): Health {
  const phase = str(o, 'status.phase', 'unknown');
  return phase === 'Bound'
    ? current('PVC is Bound')
    : inProgress('NotBound', `PVC is not Bound. phase: ${phase}`);
}

/** SCHEDULE_WINDOW is how long kstatus gives an unschedulable Pod before it is Failed. */
const SCHEDULE_WINDOW_MS = 15_000;

function pod(o: KubeObject, now: number): Health {
  const cs = conditions(o);
  switch (str(o, 'status.phase', '')) {
    case 'Succeeded':
      return current('Pod has completed successfully');
    case 'Failed':
      return current('Pod has completed, but not successfully');
    case 'Running': {
      if (cs.some((c) => c.type === 'Ready' && c.status === 'True')) return current('Pod is Ready');
      const statuses = field(o, 'status.containerStatuses');
      const looping = (Array.isArray(statuses) ? (statuses as Obj[]) : [])
        .filter((c) => field(c, 'state.waiting.reason') === 'CrashLoopBackOff')
        .map((c) => String(c.name));
      if (looping.length > 0)
        return failed('ContainerCrashLooping', `Containers in CrashLoop state: ${looping.join(',')}`);
      return inProgress('PodRunningNotReady', 'Pod is running but is not Ready');
    }
    case 'Pending': {
      const c = cs.find((x) => x.type === 'PodScheduled' && x.status === 'False');
      if (c?.reason === 'Unschedulable') {
        const created = Date.parse(String(o.metadata.creationTimestamp ?? ''));
        if (now - SCHEDULE_WINDOW_MS < created)
          return inProgress('PodNotScheduled', 'Pod has not been scheduled');
        return failed('PodUnschedulable', 'Pod could not be scheduled');
      }
      return inProgress('PodPending', 'Pod is in the Pending phase');
    }
    case '':
      return inProgress('PodNotObserved', 'Pod phase not available');
    default:
      return {
        status: 'Unknown',
        reason: 'UnknownPhase',
        message: `unknown phase ${str(o, 'status.phase', '')}`,
      };
  }
}

function job(o: KubeObject): Health {
  const parallelism = int(o, 'spec.parallelism', 1);
  const completions = int(o, 'spec.completions', parallelism);
  const succeeded = int(o, 'status.succeeded', 0);
  const active = int(o, 'status.active', 0);
  const failedPods = int(o, 'status.failed', 0);
  for (const c of conditions(o)) {
    if (c.type === 'Complete' && c.status === 'True')
      return current(`Job Completed. succeeded: ${succeeded}/${completions}`);
    if (c.type === 'Failed' && c.status === 'True')
      return failed('JobFailed', `Job Failed. failed: ${failedPods}/${completions}`);
  }
  if (str(o, 'status.startTime', '') === '') return inProgress('JobNotStarted', 'Job not started');
  return current(`Job in progress. success:${succeeded}, active: ${active}, failed: ${failedPods}`);
}

function service(o: KubeObject): Health {
  if (str(o, 'spec.type', 'ClusterIP') === 'LoadBalancer' && str(o, 'spec.clusterIP', '') === '') {
    return inProgress('NoIPAssigned', 'ClusterIP not set. Service type: LoadBalancer');
  }
  return current('Service is ready');
}

function crd(o: KubeObject): Health {
  for (const c of conditions(o)) {
    if (c.type === 'NamesAccepted' && c.status === 'False') return failed(c.reason ?? '', c.message ?? '');
    if (c.type === 'Established') {
      if (c.status === 'False' && c.reason !== 'Installing') return failed(c.reason ?? '', c.message ?? '');
      if (c.status === 'True') return current('CRD is established');
    }
  }
  return inProgress('Installing', 'Install in progress');
}

/** namespace: kstatus has no rule; a Namespace whose phase is Terminating is being deleted. */
function namespace(o: KubeObject): Health {
  return str(o, 'status.phase', 'Active') === 'Terminating'
    ? { status: 'Terminating', message: 'Namespace is terminating' }
    : current('Namespace is active');
}

/** RULES are kstatus's built-in kinds by group/kind ("" group: the kind alone), and Namespace. */
const RULES: Record<string, (o: KubeObject, now: number) => Health> = {
  Service: service,
  Pod: pod,
  Secret: always,
  PersistentVolumeClaim: pvc,
  ConfigMap: always,
  Namespace: namespace,
  'apps/StatefulSet': statefulSet,
  'apps/DaemonSet': daemonSet,
  'extensions/DaemonSet': daemonSet,
  'apps/Deployment': deployment,
  'extensions/Deployment': deployment,
  'apps/ReplicaSet': replicaSet,
  'extensions/ReplicaSet': replicaSet,
  'policy/PodDisruptionBudget': () => current('AllowedDisruptions has been computed.'),
  'batch/CronJob': always,
  'batch/Job': job,
  'apiextensions.k8s.io/CustomResourceDefinition': crd,
};

/**
 * moduleState reads Kyma's module convention: status.state Ready, Processing, Warning,
 * Error or Deleting (lifecycle-manager's shared.State). Warning is a working module that
 * reports a problem: Current with reason Warning (the SyncResource says so).
 */
function moduleState(o: KubeObject): Health | undefined {
  const state = field(o, 'status.state');
  const why = (fallback: string) => {
    const c =
      conditions(o).find((x) => x.status === 'False' && x.message) ?? conditions(o).find((x) => x.message);
    return c?.message ? `${fallback}: ${c.message}` : fallback;
  };
  switch (state) {
    case 'Ready':
      return current('status.state is Ready');
    case 'Processing':
      return inProgress('Processing', why('status.state is Processing'));
    case 'Warning':
      return current(why('status.state is Warning'), 'Warning');
    case 'Error':
      return failed('Error', why('status.state is Error'));
    case 'Deleting':
      return { status: 'Terminating', reason: 'Deleting', message: 'status.state is Deleting' };
    default:
      return undefined;
  }
}

/** readyCondition is kstatus's last resort: a Ready condition, widely used though not a convention. */
function readyCondition(o: KubeObject): Health | undefined {
  const c = conditions(o).find((x) => x.type === 'Ready');
  if (c?.status === 'True') return current('Resource is Ready');
  if (c?.status === 'False' || c?.status === 'Unknown') return inProgress(c.reason ?? '', c.message ?? '');
  return undefined;
}

/** healthOf computes an object's health by kstatus's rules (or the item's own CEL rules); bounded messages. */
export function healthOf(o: KubeObject, rules?: CompiledRules, now = Date.now()): Health {
  const h = rules ? (o.metadata.deletionTimestamp ? generic(o)! : ruleHealth(rules, o)) : kstatus(o, now);
  return { ...h, message: bounded(h.message, 512) };
}

function kstatus(o: KubeObject, now: number): Health {
  const g = generic(o);
  if (g) return g;
  const group = o.apiVersion.includes('/') ? o.apiVersion.split('/')[0] : '';
  const rule = RULES[group ? `${group}/${o.kind}` : o.kind];
  if (rule) return rule(o, now);
  return moduleState(o) ?? readyCondition(o) ?? current('Resource is current');
}

/**
 * ruleHealth is an item's own rules' verdict (health-rules.ts): inProgress, failed, then
 * current (Flux's order); none true is InProgress. The latest generation must be observed
 * first, as kstatus requires of every kind.
 */
function ruleHealth(rules: CompiledRules, o: KubeObject): Health {
  const behind = notObserved(o);
  if (behind) return behind;
  const { holds, errors } = evaluateRules(rules, o);
  if (holds === 'inProgress')
    return inProgress('HealthRule', `health.inProgress holds: ${rules.text.inProgress}`);
  if (holds === 'failed') return failed('HealthRule', `health.failed holds: ${rules.text.failed}`);
  if (holds === 'current') return current(`health.current holds: ${rules.text.current}`, 'HealthRule');
  return inProgress(
    'HealthRule',
    errors.length > 0 ? errors.join('; ') : `health.current does not hold yet: ${rules.text.current}`,
  );
}
