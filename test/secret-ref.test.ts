// Secret values by reference (items[].dataFrom.secretRef), end to end with kubectl on the
// whole pipeline: the SKR Secret gets the source's data and the manifest's type; a
// rotation reaches it through the source Secret's event alone (no resync runs); an edit
// in the SKR is drift and reverted; removal prunes it; every refusal writes nothing in the
// SKR; and no value, nor its base64, appears in any status, Kubernetes Event, log line,
// span, CloudEvent or dead letter of the run.
import { randomBytes } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { dump, loadAll } from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accessSecretName, applyObjects } from '../infra/kcp-setup.ts';
import type { KubeObject } from '../lib/kube/objects.ts';
import { KYMA_NAME_LABEL, SYNC_SOURCE_LABEL } from '../lib/model.ts';
import { otelEnv, startCollector, type Collector } from './collector.ts';
import { kubectl, startStack, syncResourceYaml, waitSr, type Stack } from './e2e-helpers.ts';
import { cluster, eventually, uniqueName } from './helpers.ts';

let s: Stack;
let collector: Collector;
const P = uniqueName('sref');
const NS = `${P}-target`;
/** Every value the test ever puts into a source Secret: none may appear anywhere but in the SKR Secret. */
const values: string[] = [];
const secretValue = () => {
  const v = `v-${randomBytes(12).toString('hex')}`;
  values.push(v);
  return v;
};
const b64 = (v: string) => Buffer.from(v).toString('base64');
const decode = (data: Record<string, string> | undefined) =>
  Object.fromEntries(Object.entries(data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]));

/** source renders a KCP Secret for kubectl apply. */
function source(name: string, labels: Record<string, string>, data: Record<string, string>): string {
  return dump({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace: s.ns, labels },
    type: 'Opaque',
    stringData: data,
  });
}
const sourceLabels = (kyma: string) => ({ [SYNC_SOURCE_LABEL]: 'true', [KYMA_NAME_LABEL]: kyma });
const secretItem = (name: string, target: string, ref: string, extra: Record<string, unknown> = {}) => ({
  name,
  strategy: 'CreateAndSync',
  resource: dump({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: target, namespace: NS, labels: { team: 'btp' } },
    type: 'example.com/credentials',
    ...extra,
  }),
  dataFrom: { secretRef: { name: ref } },
});
const applySr = (name: string, items: unknown[], kyma = 'kyma-1') =>
  kubectl(s.kcp, ['apply', '-f', '-'], syncResourceYaml(s.ns, name, kyma, items as never));
const skrSecret = async (name: string) => {
  const out = await kubectl(s.skr[0]!, ['get', 'secret', name, '-n', NS, '-o', 'json', '--ignore-not-found']);
  return out.trim()
    ? (JSON.parse(out) as {
        type: string;
        data?: Record<string, string>;
        metadata: { labels?: Record<string, string> };
      })
    : undefined;
};

describe('Secret values by reference', () => {
  beforeAll(async () => {
    collector = await startCollector();
    // No timed resync: a rotation can only arrive through the source Secret's event.
    s = await startStack('sref', { env: otelEnv(collector.endpoint), pingIntervalMs: 3_600_000 });
    s.runtime.broker.observe = true;
    await kubectl(s.skr[0]!, ['create', 'namespace', NS]);
  });
  afterAll(async () => {
    await s?.stop();
    collector?.close();
  });

  it('creates the SKR Secret with the source data and the manifest type, rotates it by event, reverts drift and prunes it', async () => {
    const first = { clientid: secretValue(), clientsecret: secretValue() };
    await kubectl(s.kcp, ['apply', '-f', '-'], source(`${P}-btp`, sourceLabels('kyma-1'), first));
    const name = `${P}-ok`;
    await applySr(name, [secretItem('creds', 'sap-btp-manager', `${P}-btp`)]);
    // (Created, or Unchanged when the status of a second replica's run of the same request came last.)
    const sr = await waitSr(s, name, (x) =>
      expect(x?.status?.items?.[0]).toMatchObject({
        state: 'Ready',
        reason: expect.stringMatching(/^(Created|Unchanged)$/),
      }),
    );
    const created = await skrSecret('sap-btp-manager');
    expect(created?.type).toBe('example.com/credentials');
    expect(created?.metadata.labels?.team).toBe('btp');
    expect(decode(created?.data)).toEqual(first);
    // The inventory records the object and a digest, never a value.
    expect(sr?.status?.synced).toEqual([
      expect.objectContaining({
        kind: 'Secret',
        name: 'sap-btp-manager',
        namespace: NS,
        digest: expect.any(String),
      }),
    ]);

    // A SyncResource of the same Kyma that references no source is not reconciled by a rotation.
    await applySr(`${P}-bystander`, [
      {
        name: 'cm',
        strategy: 'CreateAndSync',
        resource: dump({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `${P}-by`, namespace: NS } }),
      },
    ]);
    await waitSr(s, `${P}-bystander`, (x) => expect(x?.status?.state).toBe('Ready'));
    const requested = (who: string) =>
      s.runtime.broker.observed.filter(
        (e) =>
          e.attributes.type === 'io.kyma-project.syncresource.reconcile' &&
          (e.data as { name?: string; trigger?: string }).name === who &&
          (e.data as { trigger?: string }).trigger === 'secret',
      ).length;

    // Rotation: a changed value, a removed key and a new one, through the event of the source Secret.
    const second = { clientid: first.clientid, clientsecret: secretValue(), url: secretValue() };
    await kubectl(s.kcp, ['apply', '-f', '-'], source(`${P}-btp`, sourceLabels('kyma-1'), second));
    await kubectl(s.kcp, [
      'patch',
      'secret',
      `${P}-btp`,
      '-n',
      s.ns,
      '--type=json',
      '-p',
      JSON.stringify([{ op: 'remove', path: '/data/clientid' }]),
    ]);
    const rotated = { clientsecret: second.clientsecret, url: second.url };
    await eventually(
      async () => expect(decode((await skrSecret('sap-btp-manager'))?.data)).toEqual(rotated),
      30_000,
      250,
    );
    expect(requested(name)).toBeGreaterThan(0);
    expect(requested(`${P}-bystander`)).toBe(0);
    // The rotation's run settled: its status recorded what the SKR now holds (a change made
    // before that is corrected too, but as the run's own apply, not as drift).
    await waitSr(s, name, (x) =>
      expect(x?.status?.synced?.[0]?.digest).not.toBe(sr?.status?.synced?.[0]?.digest),
    );

    // Someone else edits the SKR Secret: drift, reverted on the next resync.
    await kubectl(s.skr[0]!, [
      'patch',
      'secret',
      'sap-btp-manager',
      '-n',
      NS,
      '--type=merge',
      '-p',
      JSON.stringify({ data: { clientsecret: b64('tampered') } }),
    ]);
    s.runtime.ping[0]!.fire();
    await eventually(
      async () => expect(decode((await skrSecret('sap-btp-manager'))?.data)).toEqual(rotated),
      30_000,
      250,
    );
    // The Event is written by the status step, after the apply that reverted the Secret.
    await eventually(
      async () => {
        const out = await kubectl(s.kcp, [
          'get',
          'events.events.k8s.io',
          '-n',
          s.ns,
          '--field-selector',
          `regarding.name=${name}`,
          '-o',
          'json',
        ]);
        expect(out).toMatch(
          /Secret [^ ]+\/sap-btp-manager: data\.clientsecret changed by kubectl-patch; reverted/,
        );
      },
      30_000,
      250,
    );

    // Removing the item prunes the SKR Secret like any other object.
    await applySr(name, [
      {
        name: 'other',
        strategy: 'CreateAndSync',
        resource: dump({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `${P}-cm`, namespace: NS } }),
      },
    ]);
    await waitSr(s, name, (x) => expect(x?.status?.synced?.map((e) => e.kind)).toEqual(['ConfigMap']));
    expect(await skrSecret('sap-btp-manager')).toBeUndefined();
  });

  it("runs examples/secret-by-reference.yaml as written (in this test's namespaces)", async () => {
    // Other tests create and delete kyma-system in this SKR: the example's target namespace is one of its own here.
    const text = (
      await readFile(join(import.meta.dirname, '..', 'examples', 'secret-by-reference.yaml'), 'utf8')
    ).replaceAll('kyma-system', `${P}-kyma-system`);
    const docs = loadAll(text) as KubeObject[];
    for (const d of docs) d.metadata.namespace = s.ns;
    const src = docs.find((d) => d.kind === 'Secret') as KubeObject & { stringData: Record<string, string> };
    values.push(...Object.values(src.stringData));
    await kubectl(s.kcp, ['apply', '-f', '-'], docs.map((d) => dump(d)).join('---\n'));
    const sr = docs.find((d) => d.kind === 'SyncResource')!;
    await waitSr(s, sr.metadata.name, (x) => expect(x?.status?.state).toBe('Ready'));
    const out = JSON.parse(
      await kubectl(s.skr[0]!, ['get', 'secret', 'sap-btp-manager', '-n', `${P}-kyma-system`, '-o', 'json']),
    ) as { type: string; data: Record<string, string> };
    expect(out.type).toBe('Opaque');
    expect(decode(out.data)).toEqual(src.stringData);
  });

  it('refuses every source that may not ship here, and writes nothing in the SKR', async () => {
    const kcp = await cluster('kcp');
    // kyma-src's only labelled Secret is a sync source: it is never taken as an access Secret.
    await applyObjects(kcp, [
      {
        apiVersion: 'operator.kyma-project.io/v1beta2',
        kind: 'Kyma',
        metadata: { name: `${P}-src`, namespace: s.ns },
        spec: { channel: 'regular' },
      },
    ]);
    const refused = {
      unlabelled: source(`${P}-unlabelled`, {}, { k: secretValue() }),
      other: source(`${P}-other`, sourceLabels('kyma-2'), { k: secretValue() }),
      notTrue: source(
        `${P}-not-true`,
        { [SYNC_SOURCE_LABEL]: 'yes', [KYMA_NAME_LABEL]: 'kyma-1' },
        { k: secretValue() },
      ),
      srcAccess: source(`${P}-src-access`, sourceLabels(`${P}-src`), { config: secretValue() }),
    };
    await kubectl(s.kcp, ['apply', '-f', '-'], Object.values(refused).join('---\n'));
    const before = await kubectl(s.skr[0]!, ['get', 'secrets,configmaps', '-n', NS, '-o', 'name']);
    const name = `${P}-refused`;
    await applySr(name, [
      secretItem('missing', 'r-missing', `${P}-does-not-exist`),
      secretItem('unlabelled', 'r-unlabelled', `${P}-unlabelled`),
      secretItem('other-kyma', 'r-other', `${P}-other`),
      secretItem('label-not-true', 'r-not-true', `${P}-not-true`),
      secretItem('access-secret', 'r-access', accessSecretName('kyma-1')),
      secretItem('with-data', 'r-data', `${P}-btp`, { data: { k: b64('inline') } }),
      secretItem('with-string-data', 'r-string-data', `${P}-btp`, { stringData: { k: 'inline' } }),
      {
        ...secretItem('configmap', 'r-cm', `${P}-btp`),
        resource: dump({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'r-cm', namespace: NS } }),
      },
      {
        name: 'inline',
        strategy: 'CreateAndSync',
        resource: dump({
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: { name: 'r-inline', namespace: NS },
          stringData: { k: 'inline' },
        }),
      },
    ]);
    const sr = await waitSr(s, name, (x) => expect(x?.status?.observedGeneration).toBe(1));
    const by = Object.fromEntries((sr?.status?.items ?? []).map((i) => [i.name, i]));
    expect(by.missing).toMatchObject({
      state: 'Error',
      reason: 'SecretSourceNotFound',
      message: `Secret ${s.ns}/${P}-does-not-exist (dataFrom.secretRef) does not exist`,
    });
    expect(by.unlabelled).toMatchObject({
      state: 'Error',
      reason: 'SecretSourceRejected',
      message: expect.stringContaining(`needs the label ${SYNC_SOURCE_LABEL}="true"`),
    });
    expect(by['other-kyma']).toMatchObject({
      state: 'Error',
      reason: 'SecretSourceRejected',
      message: expect.stringContaining('is labelled for Kyma kyma-2, not for kyma-1'),
    });
    expect(by['label-not-true']).toMatchObject({ state: 'Error', reason: 'SecretSourceRejected' });
    expect(by['access-secret']).toMatchObject({
      state: 'Error',
      reason: 'SecretSourceRejected',
      message: expect.stringContaining(`Secret ${s.ns}/kyma-1-kubeconfig is not a sync source`),
    });
    expect(by['with-data']).toMatchObject({
      state: 'Error',
      reason: 'InvalidManifest',
      message: expect.stringContaining('resource sets data'),
    });
    expect(by['with-string-data']).toMatchObject({
      state: 'Error',
      reason: 'InvalidManifest',
      message: expect.stringContaining('resource sets stringData'),
    });
    expect(by.configmap).toMatchObject({
      state: 'Error',
      reason: 'InvalidManifest',
      message: 'dataFrom is allowed only on a v1 Secret, not on v1/ConfigMap',
    });
    expect(by.inline).toMatchObject({ state: 'Warning', reason: 'Restricted' });
    expect(sr?.status?.synced ?? []).toEqual([]);
    expect(await kubectl(s.skr[0]!, ['get', 'secrets,configmaps', '-n', NS, '-o', 'name'])).toBe(before);

    // A Kyma whose only labelled Secret is a sync source has no access Secret.
    await applySr(
      `${P}-src-sr`,
      [
        {
          name: 'cm',
          strategy: 'CreateAndSync',
          resource: dump({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'r-src', namespace: NS } }),
        },
      ],
      `${P}-src`,
    );
    await waitSr(s, `${P}-src-sr`, (x) =>
      expect(x?.status?.conditions?.find((c) => c.reason === 'AccessSecretNotFound')).toBeDefined(),
    );

    // dataFrom without a resource, or on a Delete item, is refused at admission.
    await expect(
      applySr(`${P}-adm1`, [
        {
          name: 'x',
          strategy: 'CreateAndSync',
          subresource: 'apiVersion: v1\nkind: Secret\nmetadata: {name: a}\nstatus: {}\n',
          dataFrom: { secretRef: { name: 'a' } },
        },
      ]),
    ).rejects.toThrow(/dataFrom needs a resource/);
    await expect(
      applySr(`${P}-adm2`, [{ ...secretItem('x', 'a', 'a'), strategy: 'Delete' }]),
    ).rejects.toThrow(/strategy Delete takes no dataFrom/);
    await expect(applySr(`${P}-adm3`, [secretItem('x', 'a', '../a')])).rejects.toThrow(
      /spec\.items\[0\]\.dataFrom\.secretRef\.name/,
    );
  });

  it('keeps values out of an item message even when the SKR quotes them in a refusal', async () => {
    const value = secretValue();
    await kubectl(s.kcp, ['apply', '-f', '-'], source(`${P}-echo`, sourceLabels('kyma-1'), { k: value }));
    // An admission policy in the SKR that refuses the Secret and quotes its value in the message.
    await kubectl(
      s.skr[0]!,
      ['apply', '-f', '-'],
      [
        dump({
          apiVersion: 'admissionregistration.k8s.io/v1',
          kind: 'ValidatingAdmissionPolicy',
          metadata: { name: `${P}-echo` },
          spec: {
            failurePolicy: 'Fail',
            matchConstraints: {
              resourceRules: [
                {
                  apiGroups: [''],
                  apiVersions: ['v1'],
                  operations: ['CREATE', 'UPDATE'],
                  resources: ['secrets'],
                },
              ],
            },
            validations: [
              {
                expression: "object.metadata.name != 'r-echo'",
                messageExpression: "'refused value ' + string(object.data.k)",
              },
            ],
          },
        }),
        dump({
          apiVersion: 'admissionregistration.k8s.io/v1',
          kind: 'ValidatingAdmissionPolicyBinding',
          metadata: { name: `${P}-echo` },
          spec: {
            policyName: `${P}-echo`,
            validationActions: ['Deny'],
            matchResources: { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': NS } } },
          },
        }),
      ].join('---\n'),
    );
    const probe = dump({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'r-echo', namespace: NS },
      data: { k: b64('probe') },
    });
    // (string() of bytes quotes the base64.) Policies take a moment to be in force.
    await eventually(() =>
      expect(kubectl(s.skr[0]!, ['create', '--dry-run=server', '-f', '-'], probe)).rejects.toThrow(
        `refused value ${b64('probe')}`,
      ),
    );
    const name = `${P}-echo`;
    await applySr(name, [secretItem('echo', 'r-echo', `${P}-echo`)]);
    const sr = await waitSr(s, name, (x) => expect(x?.status?.items?.[0]?.reason).toBe('ApplyFailed'));
    expect(sr?.status?.items?.[0]?.message).toContain('refused value ***');
    expect(await skrSecret('r-echo')).toBeUndefined();
  });

  it('leaves no value of a source Secret, nor its base64, anywhere but in the SKR Secret', async () => {
    // Spans are exported in batches: wait until the last run's are in.
    await eventually(async () =>
      expect(collector.spans.some((sp) => sp.attributes['sync.item'] === 'echo')).toBe(true),
    );
    expect(values.length).toBeGreaterThanOrEqual(7);
    const logs = await Promise.all(
      (await readdir(join(s.stateDir, 'logs'))).map((f) => readFile(join(s.stateDir, 'logs', f), 'utf8')),
    );
    const deadLetters = await readFile(join(s.stateDir, 'dead-letters.log'), 'utf8').catch(() => '');
    const captured = {
      logs: logs.join('\n'),
      cloudEvents: JSON.stringify(s.runtime.broker.observed),
      deadLetters,
      status: await kubectl(s.kcp, ['get', 'syncresources', '-n', s.ns, '-o', 'json']),
      kubeEvents: await kubectl(s.kcp, ['get', 'events.events.k8s.io', '-n', s.ns, '-o', 'json']),
      spans: JSON.stringify(collector.spans),
    };
    for (const [where, text] of Object.entries(captured)) {
      if (where !== 'deadLetters') expect(text.length, where).toBeGreaterThan(100);
      for (const v of values) {
        expect(text.includes(v), `${where} holds a value`).toBe(false);
        expect(text.includes(b64(v)), `${where} holds a value's base64`).toBe(false);
      }
    }
  });
});
