// The project's own Kyma CRD (infra/crds/kyma.yaml, in the KCP) agrees with
// lifecycle-manager's real one (../shared/crds/kyma, installed into an SKR for this
// test) on the fields the product uses.
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { installCrds } from '../infra/kcp-setup.ts';
import { resourcePath } from '../lib/kube/discovery.ts';
import { mustFind, type Cluster, type KubeObject } from '../lib/kube/objects.ts';
import { KubeApiError } from '../lib/kube/errors.ts';
import { cluster, eventually } from './helpers.ts';

const realCrd = join(
  import.meta.dirname,
  '..',
  '..',
  'shared',
  'crds',
  'kyma',
  'operator.kyma-project.io_kymas.yaml',
);

const kyma = (spec: unknown, name = 'kyma-x', labels: Record<string, string> = {}): KubeObject =>
  ({
    apiVersion: 'operator.kyma-project.io/v1beta2',
    kind: 'Kyma',
    metadata: { name, namespace: 'default', labels },
    spec,
  }) as KubeObject;

const samples: [string, KubeObject][] = [
  ['regular channel', kyma({ channel: 'regular' })],
  ['fast channel with labels', kyma({ channel: 'fast' }, 'kyma-y', { 'kyma-project.io/runtime-id': 'abc' })],
  ['modules list', kyma({ channel: 'regular', modules: [{ name: 'keda', managed: true }] })],
  ['missing channel', kyma({})],
  ['channel too short', kyma({ channel: 'ab' })],
  ['channel with capitals', kyma({ channel: 'Regular' })],
  ['channel too long', kyma({ channel: 'a'.repeat(33) })],
  ['no spec', kyma(undefined)],
];

/**
 * verdict is the API server's answer to a dry-run create: accepted, or rejected as invalid
 * (422). Anything else (discovery not caught up with a CRD just established) is no verdict.
 */
async function verdict(c: Cluster, obj: KubeObject): Promise<string> {
  const info = await eventually(() => mustFind(c, obj.apiVersion, obj.kind));
  try {
    await c.client.call('POST', resourcePath(info, obj.metadata.namespace), {
      body: obj,
      query: { dryRun: 'All' },
    });
    return 'accepted';
  } catch (err) {
    if (err instanceof KubeApiError && err.code === 422) return 'rejected';
    throw err;
  }
}

describe('Kyma CRD', () => {
  beforeAll(async () => {
    await installCrds(await cluster(1), [realCrd]);
  });

  it.each(samples)('agrees with lifecycle-manager on %s', async (_, obj) => {
    const real = await verdict(await cluster(1), obj);
    const ours = await verdict(await cluster('kcp'), obj);
    expect(ours).toBe(real);
  });

  it('has samples on both sides of the line', async () => {
    const verdicts = await Promise.all(samples.map(async ([, o]) => verdict(await cluster(1), o)));
    expect(new Set(verdicts)).toEqual(new Set(['accepted', 'rejected']));
  });
});
