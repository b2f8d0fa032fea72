// Health rules: kstatus's, case by case as its status_compute_test.go states them, Kyma's
// module state, CEL rules and feedback paths.
import { describe, expect, it } from 'vitest';
import { compileFeedback, readFeedback } from './feedback.ts';
import { healthOf } from './health.ts';
import { compileRules } from './health-rules.ts';
import type { KubeObject } from './kube/objects.ts';
import { ManifestError } from './manifest.ts';

const obj = (
  apiVersion: string,
  kind: string,
  rest: Record<string, unknown> = {},
  metadata: Record<string, unknown> = {},
): KubeObject =>
  ({
    apiVersion,
    kind,
    metadata: { name: 'x', namespace: 'ns', generation: 1, ...metadata },
    ...rest,
  }) as KubeObject;
const conds = (...c: [string, string, string?][]) =>
  c.map(([type, status, reason]) => ({ type, status, ...(reason ? { reason } : {}) }));

describe('kstatus rules', () => {
  it.each([
    [
      'being deleted',
      obj('v1', 'ConfigMap', {}, { deletionTimestamp: '2026-01-01T00:00:00Z' }),
      'Terminating',
      undefined,
    ],
    [
      'generation not observed',
      obj('example.com/v1', 'Thing', { status: { observedGeneration: 1 } }, { generation: 2 }),
      'InProgress',
      'LatestGenerationNotObserved',
    ],
    [
      'Reconciling condition',
      obj('example.com/v1', 'Thing', { status: { conditions: conds(['Reconciling', 'True', 'Working']) } }),
      'InProgress',
      'Working',
    ],
    [
      'Stalled condition',
      obj('example.com/v1', 'Thing', { status: { conditions: conds(['Stalled', 'True', 'Broken']) } }),
      'Failed',
      'Broken',
    ],
    [
      'Ready False',
      obj('example.com/v1', 'Thing', { status: { conditions: conds(['Ready', 'False', 'Waiting']) } }),
      'InProgress',
      'Waiting',
    ],
    [
      'Ready True',
      obj('example.com/v1', 'Thing', { status: { conditions: conds(['Ready', 'True']) } }),
      'Current',
      undefined,
    ],
    ['no rule', obj('example.com/v1', 'Thing'), 'Current', undefined],
    [
      'Deployment rolling out',
      obj('apps/v1', 'Deployment', {
        spec: { replicas: 2 },
        status: {
          observedGeneration: 1,
          replicas: 2,
          updatedReplicas: 2,
          availableReplicas: 1,
          readyReplicas: 1,
        },
      }),
      'InProgress',
      'LessAvailable',
    ],
    [
      'Deployment past its deadline',
      obj('apps/v1', 'Deployment', {
        spec: { replicas: 1, progressDeadlineSeconds: 10 },
        status: {
          observedGeneration: 1,
          conditions: conds(['Progressing', 'False', 'ProgressDeadlineExceeded']),
        },
      }),
      'Failed',
      'ProgressDeadlineExceeded',
    ],
    [
      'Deployment available',
      obj('apps/v1', 'Deployment', {
        spec: { replicas: 1, progressDeadlineSeconds: 600 },
        status: {
          observedGeneration: 1,
          replicas: 1,
          updatedReplicas: 1,
          availableReplicas: 1,
          readyReplicas: 1,
          conditions: conds(['Progressing', 'True', 'NewReplicaSetAvailable'], ['Available', 'True']),
        },
      }),
      'Current',
      undefined,
    ],
    [
      'Deployment without Available',
      obj('apps/v1', 'Deployment', {
        spec: { replicas: 1, progressDeadlineSeconds: 600 },
        status: {
          observedGeneration: 1,
          replicas: 1,
          updatedReplicas: 1,
          availableReplicas: 1,
          readyReplicas: 1,
          conditions: conds(['Progressing', 'True', 'NewReplicaSetAvailable']),
        },
      }),
      'InProgress',
      'DeploymentNotAvailable',
    ],
    [
      'StatefulSet revision mismatch',
      obj('apps/v1', 'StatefulSet', {
        spec: { replicas: 1 },
        status: {
          observedGeneration: 1,
          replicas: 1,
          readyReplicas: 1,
          currentReplicas: 1,
          currentRevision: 'a',
          updateRevision: 'b',
        },
      }),
      'InProgress',
      'RevisionMismatch',
    ],
    [
      'StatefulSet OnDelete',
      obj('apps/v1', 'StatefulSet', { spec: { updateStrategy: { type: 'OnDelete' } } }),
      'Current',
      undefined,
    ],
    [
      'DaemonSet without observedGeneration',
      obj('apps/v1', 'DaemonSet', { status: {} }),
      'InProgress',
      'NoObservedGeneration',
    ],
    [
      'DaemonSet ready',
      obj('apps/v1', 'DaemonSet', {
        status: {
          observedGeneration: 1,
          desiredNumberScheduled: 1,
          currentNumberScheduled: 1,
          updatedNumberScheduled: 1,
          numberAvailable: 1,
          numberReady: 1,
        },
      }),
      'Current',
      undefined,
    ],
    [
      'ReplicaSet failure',
      obj('apps/v1', 'ReplicaSet', { status: { conditions: conds(['ReplicaFailure', 'True']) } }),
      'InProgress',
      'ReplicaFailure',
    ],
    [
      'Job complete',
      obj('batch/v1', 'Job', { status: { conditions: conds(['Complete', 'True']), succeeded: 1 } }),
      'Current',
      undefined,
    ],
    [
      'Job failed',
      obj('batch/v1', 'Job', { status: { conditions: conds(['Failed', 'True']), failed: 1 } }),
      'Failed',
      'JobFailed',
    ],
    ['Job not started', obj('batch/v1', 'Job', { status: {} }), 'InProgress', 'JobNotStarted'],
    [
      'Pod crash-looping',
      obj('v1', 'Pod', {
        status: {
          phase: 'Running',
          containerStatuses: [{ name: 'c', state: { waiting: { reason: 'CrashLoopBackOff' } } }],
        },
      }),
      'Failed',
      'ContainerCrashLooping',
    ],
    [
      'Pod unschedulable for long',
      obj(
        'v1',
        'Pod',
        { status: { phase: 'Pending', conditions: conds(['PodScheduled', 'False', 'Unschedulable']) } },
        { creationTimestamp: '2020-01-01T00:00:00Z' },
      ),
      'Failed',
      'PodUnschedulable',
    ],
    ['Pod succeeded', obj('v1', 'Pod', { status: { phase: 'Succeeded' } }), 'Current', undefined],
    [
      'PVC pending',
      obj('v1', 'PersistentVolumeClaim', { status: { phase: 'Pending' } }),
      'InProgress',
      'NotBound',
    ],
    ['PVC bound', obj('v1', 'PersistentVolumeClaim', { status: { phase: 'Bound' } }), 'Current', undefined],
    [
      'LoadBalancer without IP',
      obj('v1', 'Service', { spec: { type: 'LoadBalancer' } }),
      'InProgress',
      'NoIPAssigned',
    ],
    ['PodDisruptionBudget', obj('policy/v1', 'PodDisruptionBudget'), 'Current', undefined],
    [
      'CRD installing',
      obj('apiextensions.k8s.io/v1', 'CustomResourceDefinition', { status: {} }),
      'InProgress',
      'Installing',
    ],
    [
      'CRD names refused',
      obj('apiextensions.k8s.io/v1', 'CustomResourceDefinition', {
        status: { conditions: conds(['NamesAccepted', 'False', 'MultipleNamesNotAllowed']) },
      }),
      'Failed',
      'MultipleNamesNotAllowed',
    ],
    [
      'Namespace terminating',
      obj('v1', 'Namespace', { status: { phase: 'Terminating' } }),
      'Terminating',
      undefined,
    ],
    [
      'module CR Error',
      obj('operator.kyma-project.io/v1alpha1', 'Keda', {
        status: {
          state: 'Error',
          conditions: [{ type: 'Installation', status: 'False', message: 'chart failed' }],
        },
      }),
      'Failed',
      'Error',
    ],
    [
      'module CR Processing',
      obj('operator.kyma-project.io/v1alpha1', 'Keda', { status: { state: 'Processing' } }),
      'InProgress',
      'Processing',
    ],
    [
      'module CR Warning',
      obj('operator.kyma-project.io/v1alpha1', 'Keda', { status: { state: 'Warning' } }),
      'Current',
      'Warning',
    ],
    [
      'module CR Ready',
      obj('operator.kyma-project.io/v1alpha1', 'Keda', { status: { state: 'Ready' } }),
      'Current',
      undefined,
    ],
  ])('%s', (_name, o, status, reason) => {
    const h = healthOf(o, undefined, Date.parse('2026-12-01T00:00:00Z'));
    expect({ status: h.status, reason: h.reason }).toEqual({ status, reason });
  });

  it('names the module CR problem from its conditions', () => {
    const h = healthOf(
      obj('operator.kyma-project.io/v1alpha1', 'Keda', {
        status: {
          state: 'Error',
          conditions: [{ type: 'Installation', status: 'False', message: 'chart failed' }],
        },
      }),
    );
    expect(h.message).toBe('status.state is Error: chart failed');
  });
});

describe('CEL health rules', () => {
  const rules = compileRules({
    inProgress: "status.phase == 'Pending'",
    failed: "status.phase == 'Broken'",
    current:
      "status.readyReplicas >= 2 && status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')",
  });
  it.each([
    [{ phase: 'Pending' }, 'InProgress'],
    [{ phase: 'Broken' }, 'Failed'],
    [{ readyReplicas: 2, conditions: conds(['Ready', 'True']) }, 'Current'],
    [{ readyReplicas: 1, conditions: conds(['Ready', 'True']) }, 'InProgress'],
    // A field not there yet makes an expression not true, never an error of the run.
    [{}, 'InProgress'],
  ])('%j is %s', (status, expected) => {
    expect(healthOf(obj('example.com/v1', 'Thing', { status }), rules).status).toBe(expected);
  });
  it('waits for the latest generation to be observed first', () => {
    expect(
      healthOf(
        obj(
          'example.com/v1',
          'Thing',
          { status: { observedGeneration: 1, phase: 'Broken' } },
          { generation: 2 },
        ),
        rules,
      ).reason,
    ).toBe('LatestGenerationNotObserved');
  });
  it.each([
    [{ current: 'status.x ==' }, /health.current does not compile/],
    [{ current: 'nosuchvar == 1' }, /health.current does not compile: Unknown variable: nosuchvar/],
    [{ current: '"text"' }, /health.current does not compile: is of type string, not bool/],
    [
      { current: 'true', failed: 'x'.repeat(1025) },
      /health.failed is 1025 characters, over the limit of 1024/,
    ],
    // Cost is bounded when compiled: a nest of macros deeper than the limit does not compile.
    [{ current: `${'['.repeat(40)}1${']'.repeat(40)} == []` }, /health.current does not compile/],
  ])('%j is refused', (r, message) => {
    expect(() => compileRules(r)).toThrow(ManifestError);
    expect(() => compileRules(r)).toThrow(message);
  });
});

describe('feedback', () => {
  const live = obj('operator.kyma-project.io/v1alpha1', 'Keda', {
    metadata: { name: 'x', labels: { 'app.kubernetes.io/name': 'keda' } },
    status: {
      state: 'Ready',
      conditions: [
        { type: 'Installation', status: 'True' },
        { type: 'Ready', status: 'False' },
      ],
      replicas: 3,
      big: 'x'.repeat(2000),
    },
  });
  it('reads fields, quoted keys, indexes and equality filters', () => {
    const paths = compileFeedback(
      [
        { name: 'state', jsonPath: '.status.state' },
        { name: 'ready', jsonPath: '{.status.conditions[?(@.type=="Ready")].status}' },
        { name: 'first', jsonPath: '.status.conditions[0]' },
        { name: 'app', jsonPath: ".metadata.labels['app.kubernetes.io/name']" },
        { name: 'replicas', jsonPath: '$.status.replicas' },
        { name: 'missing', jsonPath: '.status.nothing' },
        { name: 'big', jsonPath: '.status.big' },
      ],
      live,
    );
    expect(readFeedback(paths, live)).toEqual([
      { name: 'state', value: 'Ready' },
      { name: 'ready', value: 'False' },
      { name: 'first', value: '{"type":"Installation","status":"True"}' },
      { name: 'app', value: 'keda' },
      { name: 'replicas', value: '3' },
      { name: 'missing', message: 'not set' },
      { name: 'big', message: 'value is over 1024 bytes' },
    ]);
  });
  it.each([
    [[{ name: 'a', jsonPath: '.status..x' }], { apiVersion: 'v1', kind: 'ConfigMap' }, /not supported at/],
    [
      [{ name: 'a', jsonPath: '.status[?(@.x > 1)]' }],
      { apiVersion: 'v1', kind: 'ConfigMap' },
      /not supported at/,
    ],
    [
      [{ name: 'a', jsonPath: '.data.password' }],
      { apiVersion: 'v1', kind: 'Secret' },
      /never read from a Secret/,
    ],
    [
      Array.from({ length: 9 }, (_, i) => ({ name: `f${i}`, jsonPath: '.x' })),
      { apiVersion: 'v1', kind: 'ConfigMap' },
      /over the limit of 8/,
    ],
    [
      [
        { name: 'a', jsonPath: '.x' },
        { name: 'a', jsonPath: '.y' },
      ],
      { apiVersion: 'v1', kind: 'ConfigMap' },
      /named twice/,
    ],
  ])('%j on %j is refused', (rules, kind, message) => {
    expect(() => compileFeedback(rules, kind)).toThrow(message);
  });
});
