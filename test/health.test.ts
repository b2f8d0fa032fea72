// Health end to end, with kubectl on the whole pipeline and real Pods (kube-scheduler and a
// KWOK Node in each SKR): a Deployment rolls out and its SyncResource turns Ready by the
// SKR source's watch alone (the resync tick is held); one that can never run ends Error/Unhealthy;
// a Job that completes and one that fails; the seed's NFS claim bound to its volume; a
// module CR whose status.state is Error, with its state as feedback; a CEL rule; a Secret
// refused as a feedback source; no status write while health holds; a deletion that waits
// for a Namespace ends as soon as the SKR source sees it gone.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { load } from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SyncItem, SyncResource } from '../lib/model.ts';
import { EventTypes } from '../lib/events/contract.ts';
import { NODE_NAME } from '../infra/clusters.ts';
import { kubeEvents, kubectl, startStack, waitSr, type Stack } from './e2e-helpers.ts';
import { Harness } from './engine-harness.ts';
import { uniqueName } from './helpers.ts';

let s: Stack;
const P = uniqueName('health');
const group = `${P}.example.io`;

const sr = (name: string, kyma: string, items: SyncItem[]) =>
  JSON.stringify({
    apiVersion: 'operator.kyma-project.io/v1alpha1',
    kind: 'SyncResource',
    metadata: { name, namespace: s.ns },
    spec: { kyma, items },
  });
const item = (name: string, resource: string, extra: Partial<SyncItem> = {}): SyncItem => ({
  name,
  strategy: 'CreateAndSync',
  resource,
  ...extra,
});
const deployment = (name: string, extra = '') => `apiVersion: apps/v1
kind: Deployment
metadata: {name: ${name}, namespace: ${P}}
spec:
  replicas: 2
  selector: {matchLabels: {app: ${name}}}
${extra}  template:
    metadata: {labels: {app: ${name}}}
    spec: {containers: [{name: c, image: example.io/app:1}]}
`;
const job = (name: string, failing: boolean) => `apiVersion: batch/v1
kind: Job
metadata: {name: ${name}, namespace: ${P}}
spec:
  backoffLimit: 0
  template:
    metadata: {labels: {pod-container-running-failed.stage.kwok.x-k8s.io: "${failing}"}}
    spec: {restartPolicy: Never, containers: [{name: c, image: example.io/job:1}]}
`;
// A module CR of a CRD the SyncResources bring, its status.state written by a subresource item.
const crd = Harness.crd(group, 'Module', 'modules');
const cr = (name: string) =>
  `apiVersion: ${group}/v1alpha1\nkind: Module\nmetadata: {name: ${name}, namespace: ${P}}\nspec: {}\n`;
const status = (name: string, st: Record<string, unknown>) =>
  `apiVersion: ${group}/v1alpha1\nkind: Module\nmetadata: {name: ${name}, namespace: ${P}}\nstatus: ${JSON.stringify(st)}\n`;
const healthOf = (x: SyncResource | undefined, name: string) =>
  x?.status?.items?.find((i) => i.name === name)?.health;
const condition = (x: SyncResource | undefined, type: string) =>
  x?.status?.conditions?.find((c) => c.type === type);

const events = (name: string) => kubeEvents(s, name);

beforeAll(async () => {
  // The resync tick is held for the whole file: what changes comes from KCP events and the SKR source.
  s = await startStack('health', { pingIntervalMs: 3_600_000 });
  await kubectl(s.skr[0]!, ['create', 'namespace', P]);
}, 300_000);

afterAll(async () => {
  await s?.stop();
});

describe('health', () => {
  it('reports a rollout until it is Ready, by the SKR source alone', async () => {
    await kubectl(
      s.kcp,
      ['apply', '-f', '-'],
      sr(`${P}-roll`, 'kyma-1', [item('web', deployment(`${P}-web`))]),
    );
    const ready = await waitSr(
      s,
      `${P}-roll`,
      (x) => {
        expect(x?.status?.state).toBe('Ready');
        expect(healthOf(x, 'web')).toEqual({
          status: 'Current',
          message: 'Deployment is available. Replicas: 2',
        });
      },
      90_000,
    );
    expect(condition(ready, 'Healthy')).toMatchObject({ status: 'True', reason: 'Healthy' });
    expect(condition(ready, 'Progressing')).toMatchObject({ status: 'False', reason: 'Settled' });
    // It was on its way first (the first status after the create); its first state
    // (Processing, in its status) is no Event, its turn to Ready is one, naming the object
    // that turned healthy (no Healthy Event beside it).
    expect(await events(`${P}-roll`)).toContainEqual({
      reason: 'Ready',
      note: `Deployment ${P}/${P}-web: Deployment is available. Replicas: 2`,
    });
    const reasons = (await events(`${P}-roll`)).map((e) => e.reason);
    expect(reasons).not.toContain('Processing');
    expect(reasons).not.toContain('Healthy');
    expect(
      JSON.parse(await kubectl(s.skr[0]!, ['get', 'deployment', `${P}-web`, '-n', P, '-o', 'json'])).status
        .availableReplicas,
    ).toBe(2);

    // Settled: resync ticks write no status but the first, which records the item as
    // Unchanged (its creation applied it). That write is waited for, not a quiet broker:
    // resync answers its tick before it posts the batch, and on a loaded machine the
    // broker can be quiet for a moment between the two.
    s.runtime.ping[0]!.fire();
    await waitSr(s, `${P}-roll`, (x) =>
      expect(x?.status?.items?.find((i) => i.name === 'web')?.reason).toBe('Unchanged'),
    );
    await s.runtime.broker.idle();
    const rv = (await waitSr(s, `${P}-roll`, () => undefined))!.metadata.resourceVersion;
    for (let i = 0; i < 3; i++) {
      s.runtime.ping[0]!.fire();
      await s.runtime.broker.idle();
    }
    const after = await waitSr(s, `${P}-roll`, () => undefined);
    expect(after?.metadata.resourceVersion).toBe(rv);
  }, 150_000);

  it('writes a rollout that completes after its status from the SKR source report, with no run', async () => {
    // Its Pods wait for a Node label, so the first run's status (Processing) is written first.
    const label = `${P}-go`;
    const held = `apiVersion: apps/v1
kind: Deployment
metadata: {name: ${P}-held, namespace: ${P}}
spec:
  replicas: 2
  selector: {matchLabels: {app: ${P}-held}}
  template:
    metadata: {labels: {app: ${P}-held}}
    spec: {nodeSelector: {${label}: "yes"}, containers: [{name: c, image: example.io/app:1}]}
`;
    const config = `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${P}-held, namespace: ${P}}\ndata: {k: v}\n`;
    s.runtime.broker.observe = true;
    await kubectl(
      s.kcp,
      ['apply', '-f', '-'],
      sr(`${P}-held`, 'kyma-1', [item('web', held), item('cm', config)]),
    );
    await waitSr(s, `${P}-held`, (x) => {
      expect(x?.status?.state).toBe('Processing');
      expect(healthOf(x, 'web')?.status).toBe('InProgress');
    });
    const of = (type: string) =>
      s.runtime.broker.observed.filter(
        (o) => o.attributes.type === type && (o.data as { name?: string }).name === `${P}-held`,
      ).length;
    // Whatever the creation set going has run its course (a finding of the SKR source before the status, a label).
    await s.runtime.broker.idle();
    const reasons = (await waitSr(s, `${P}-held`, () => undefined))?.status?.items?.map((i) => [
      i.name,
      i.reason,
    ]);
    const runs = of(EventTypes.clusterResolved);
    const changes = of(EventTypes.skrChanged);
    await kubectl(s.skr[0]!, ['label', 'node', NODE_NAME, `${label}=yes`]);
    const ready = await waitSr(s, `${P}-held`, (x) => {
      expect(x?.status?.state).toBe('Ready');
      expect(healthOf(x, 'web')).toEqual({
        status: 'Current',
        message: 'Deployment is available. Replicas: 2',
      });
    });
    s.runtime.broker.observe = false;
    expect(of(EventTypes.skrHealth)).toBeGreaterThan(0);
    // Written by write-status from the report: no run read the SyncResource or its objects again.
    expect(of(EventTypes.clusterResolved)).toBe(runs);
    expect(of(EventTypes.skrChanged)).toBe(changes);
    // Each item keeps what its last run said; the turn is news as it would be after a run.
    expect(ready?.status?.items?.map((i) => [i.name, i.reason])).toEqual(reasons);
    expect(condition(ready, 'Progressing')).toMatchObject({ status: 'False', reason: 'Settled' });
    const told = await events(`${P}-held`);
    expect(told).toContainEqual({
      reason: 'Ready',
      note: `Deployment ${P}/${P}-held: Deployment is available. Replicas: 2`,
    });
    expect(told.map((e) => e.reason)).not.toContain('Healthy');
    await kubectl(s.skr[0]!, ['label', 'node', NODE_NAME, `${label}-`]);
  }, 120_000);

  it('ends Error/Unhealthy for a Deployment that can never run, names it and why', async () => {
    // No Node matches the selector: the Pods stay Pending until the progress deadline passes.
    const stuck = deployment(`${P}-stuck`, '  progressDeadlineSeconds: 3\n').replace(
      'spec: {containers:',
      'spec: {nodeSelector: {nowhere: "true"}, containers:',
    );
    await kubectl(s.kcp, ['apply', '-f', '-'], sr(`${P}-stuck`, 'kyma-1', [item('stuck', stuck)]));
    const failed = await waitSr(s, `${P}-stuck`, (x) => expect(x?.status?.state).toBe('Error'), 90_000);
    expect(failed?.status?.conditions?.[0]).toMatchObject({ type: 'Resources', status: 'True' });
    expect(condition(failed, 'Healthy')).toMatchObject({ status: 'False', reason: 'Unhealthy' });
    expect(healthOf(failed, 'stuck')).toEqual({
      status: 'Failed',
      reason: 'ProgressDeadlineExceeded',
      message: 'Progress deadline exceeded',
    });
    expect(failed?.status?.items?.[0]?.state).toBe('Ready');
    const message = `1 of 1 objects are unhealthy: Deployment ${P}/${P}-stuck: ProgressDeadlineExceeded: Progress deadline exceeded`;
    expect(condition(failed, 'Healthy')?.message).toBe(message);
    expect(await events(`${P}-stuck`)).toContainEqual({
      reason: 'Unhealthy',
      note: `Deployment ${P}/${P}-stuck: ProgressDeadlineExceeded: Progress deadline exceeded`,
    });
  }, 150_000);

  it('tells a Job that completes from one that fails', async () => {
    await kubectl(
      s.kcp,
      ['apply', '-f', '-'],
      sr(`${P}-jobs`, 'kyma-1', [item('ok', job(`${P}-ok`, false)), item('bad', job(`${P}-bad`, true))]),
    );
    // kstatus counts a started Job Current ("Job in progress"): its SyncResource settles, and
    // the failure that follows is seen by the next resync tick (fired here; every 5 minutes in production).
    const done = await waitSr(
      s,
      `${P}-jobs`,
      (x) => {
        s.runtime.ping[0]!.fire();
        expect(healthOf(x, 'ok')?.status).toBe('Current');
        expect(healthOf(x, 'bad')?.status).toBe('Failed');
      },
      90_000,
    );
    expect(healthOf(done, 'ok')?.message).toBe('Job Completed. succeeded: 1/1');
    expect(healthOf(done, 'bad')).toEqual({
      status: 'Failed',
      reason: 'JobFailed',
      message: 'Job Failed. failed: 1/1',
    });
    expect(done?.status).toMatchObject({
      state: 'Error',
      conditions: [
        { type: 'Resources', status: 'True' },
        { type: 'Healthy', reason: 'Unhealthy' },
        { type: 'Progressing', status: 'False' },
      ],
    });
  }, 150_000);

  it('reports the seed NFS claim Bound to its volume', async () => {
    const nfs = load(
      readFileSync(join(import.meta.dirname, '..', 'examples', 'nfs.yaml'), 'utf8'),
    ) as SyncResource;
    nfs.metadata = { name: `${P}-nfs`, namespace: s.ns };
    nfs.spec.kyma = 'kyma-2';
    await kubectl(s.kcp, ['apply', '-f', '-'], JSON.stringify(nfs));
    const bound = await waitSr(s, `${P}-nfs`, (x) => expect(x?.status?.state).toBe('Ready'), 90_000);
    expect(healthOf(bound, 'nfs-1-pvc')).toEqual({ status: 'Current', message: 'PVC is Bound' });
    expect(healthOf(bound, 'nfs-1-pv')?.status).toBe('Current');
    await kubectl(s.kcp, ['delete', 'syncresource', `${P}-nfs`, '-n', s.ns, '--wait=false']);
    await waitSr(s, `${P}-nfs`, (x) => expect(x).toBeUndefined(), 90_000);
  }, 150_000);

  it('reads a module CR by its status.state, copies feedback, applies a CEL rule and refuses a Secret as feedback source', async () => {
    await kubectl(
      s.kcp,
      ['apply', '-f', '-'],
      sr(`${P}-mod`, 'kyma-1', [
        item('crd', crd),
        item('module', cr('m1'), {
          subresource: status('m1', {
            state: 'Error',
            conditions: [{ type: 'Installation', status: 'False', message: 'chart failed' }],
          }),
          feedback: [
            { name: 'state', jsonPath: '.status.state' },
            { name: 'why', jsonPath: '.status.conditions[?(@.type=="Installation")].message' },
          ],
        }),
        item('ruled', cr('m2'), {
          subresource: status('m2', { phase: 'Broken' }),
          health: { current: "status.phase == 'Done'", failed: "status.phase == 'Broken'" },
        }),
        item(
          'secret',
          `apiVersion: v1\nkind: Secret\nmetadata: {name: ${P}-s, namespace: ${P}}\nstringData: {password: hunter2}\n`,
          {
            feedback: [{ name: 'password', jsonPath: '.data.password' }],
          },
        ),
        item('bad-rule', `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${P}-cm, namespace: ${P}}\n`, {
          health: { current: 'data.x ==' },
        }),
      ]),
    );
    const out = await waitSr(
      s,
      `${P}-mod`,
      (x) =>
        expect(x?.status?.items?.map((i) => `${i.name}:${i.state}:${i.health?.status}`)).toEqual([
          'crd:Ready:Current',
          'module:Ready:Failed',
          'ruled:Ready:Failed',
          'secret:Error:undefined',
          'bad-rule:Error:undefined',
        ]),
      90_000,
    );
    const it = (n: string) => out?.status?.items?.find((i) => i.name === n);
    expect(it('module')?.health).toEqual({
      status: 'Failed',
      reason: 'Error',
      message: 'status.state is Error: chart failed',
    });
    expect(it('module')?.feedback).toEqual([
      { name: 'state', value: 'Error' },
      { name: 'why', value: 'chart failed' },
    ]);
    expect(it('ruled')?.health).toEqual({
      status: 'Failed',
      reason: 'HealthRule',
      message: "health.failed holds: status.phase == 'Broken'",
    });
    expect(it('secret')).toMatchObject({
      reason: 'InvalidManifest',
      message: 'feedback is never read from a Secret',
    });
    expect(it('bad-rule')).toMatchObject({ reason: 'InvalidManifest' });
    expect(it('bad-rule')?.message).toMatch(/^health.current does not compile: /);
    // Refused items wrote nothing in the SKR.
    expect(
      await kubectl(s.skr[0]!, [
        'get',
        'secret,configmap',
        `${P}-s`,
        `${P}-cm`,
        '-n',
        P,
        '--ignore-not-found',
        '-o',
        'name',
      ]),
    ).toBe('');
    expect(JSON.stringify(out?.status)).not.toContain('hunter2');
  }, 150_000);

  it('makes a SyncResource Warning, Healthy=False/Degraded, while a module CR reports Warning, and Ready once it does not', async () => {
    const name = `${P}-warn`;
    const spec = (state: string) =>
      sr(name, 'kyma-1', [
        item('crd', crd),
        item('module', cr('m3'), { subresource: status('m3', { state, conditions: [] }) }),
      ]);
    await kubectl(s.kcp, ['apply', '-f', '-'], spec('Warning'));
    const warned = await waitSr(s, name, (x) => expect(x?.status?.state).toBe('Warning'), 90_000);
    expect(warned?.status?.items?.find((i) => i.name === 'module')).toMatchObject({
      state: 'Ready',
      health: { status: 'Current', reason: 'Warning' },
    });
    expect(condition(warned, 'Resources')).toMatchObject({ status: 'True', reason: 'Ready' });
    expect(condition(warned, 'Healthy')).toMatchObject({
      status: 'False',
      reason: 'Degraded',
      message: `1 objects report a warning: Module ${P}/m3: Warning: status.state is Warning`,
    });
    await kubectl(s.kcp, ['apply', '-f', '-'], spec('Ready'));
    const ready = await waitSr(s, name, (x) => expect(x?.status?.state).toBe('Ready'), 90_000);
    expect(condition(ready, 'Healthy')).toMatchObject({ status: 'True', reason: 'Healthy' });
  }, 150_000);

  it('ends a deletion that waits for a Namespace when the SKR source sees it gone', async () => {
    const ns = `${P}-gone`;
    await kubectl(
      s.kcp,
      ['apply', '-f', '-'],
      sr(`${P}-ns`, 'kyma-2', [
        item('ns', `apiVersion: v1\nkind: Namespace\nmetadata: {name: ${ns}}\n`),
        item('cm', `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: ${ns}}\n`),
      ]),
    );
    await waitSr(s, `${P}-ns`, (x) => expect(x?.status?.state).toBe('Ready'), 60_000);
    await kubectl(s.kcp, ['delete', 'syncresource', `${P}-ns`, '-n', s.ns, '--wait=false']);
    // The resync tick is held: only the SKR source can see the Namespace go.
    await waitSr(s, `${P}-ns`, (x) => expect(x).toBeUndefined(), 90_000);
    expect(await kubectl(s.skr[1]!, ['get', 'namespace', ns, '--ignore-not-found', '-o', 'name'])).toBe('');
  }, 150_000);
});
