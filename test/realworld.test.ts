// The real-world corpus (../shared/realworld: upstream manifests of kyma-project's warden,
// keda-manager and btp-manager, the CSI NFS driver, podinfo, guestbook and Flux's SSA test
// inputs), end to end: every SyncResource goes through the whole pipeline into one SKR
// while `kubectl apply --server-side` puts the same item texts into another, and per item
// the product ends where kubectl ends (the same object, field by field, apart from the
// product's marks and what controllers and allocators fill in), or refuses where kubectl
// refuses; kcp-sync diff of the same text finds nothing to change; each item reports the
// health its object has (the SKRs run Pods on a KWOK Node). Then three resync ticks write
// nothing, and deleting the SyncResource leaves nothing of it. The stack has clusters of its own, so every request an SKR serves is ours.
// SYNC_PROTECTED_NAMESPACES is emptied: the NFS driver installs into kube-system as upstream ships it.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { isDeepStrictEqual } from 'node:util';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeObject } from '../lib/kube/objects.ts';
import { SYNC_SOURCE_LABEL, type SyncItem, type SyncResource } from '../lib/model.ts';
import { installRank } from '../lib/strategies.ts';
import { canonical } from '../lib/values.ts';
import { healthOf } from '../lib/health.ts';
import { validateText } from '../lib/validate.ts';
import { parseConfig } from '../lib/config.ts';
import { syncResourceSpecSchema } from '../lib/crd.ts';
import type { ItemDiff } from '../lib/diff.ts';
import { readYamlDocuments } from '../lib/yaml.ts';
import { parseApiVersion } from '../lib/policy/identity.ts';
import { getSr, kubectl, readSr, startStack, waitSr, type Stack } from './e2e-helpers.ts';
import { eventually } from './helpers.ts';

const corpusDir = join(import.meta.dirname, '..', '..', 'shared', 'realworld');
const FILES = [
  'guestbook.yaml',
  'podinfo.yaml',
  'warden.yaml',
  'keda-manager.yaml',
  'keda-release.yaml',
  'keda-release-scaledjobs-crd.yaml',
  'csi-driver-nfs.yaml',
  'btp-manager.yaml',
  'btp-operator.yaml',
  'fluxcd-pkg-ssa.yaml',
  'fluxcd-pkg-ssa-rev2.yaml',
];
// RW_FILES=a.yaml,b.yaml runs only those cases (while working on one).
const RW = process.env.RW_FILES ? process.env.RW_FILES.split(',') : FILES;
const MAX_ITEM = 262_144;

let s: Stack;
let discoveryCache: string;
let product: string;
let oracle: string;

const read = (file: string) =>
  readYamlDocuments(readFileSync(join(corpusDir, file), 'utf8')).find(
    (d): d is SyncResource => (d as KubeObject | null)?.kind === 'SyncResource',
  );

/** objectOf is an item's object as kubectl reads its text. */
const objectOf = (text: string) => readYamlDocuments(text)[0] as KubeObject;

/** typeOf names an object's kind for kubectl: Kind.version.group, the kind alone in the core group. */
const typeOf = (o: KubeObject) => {
  const { group, version } = parseApiVersion(o.apiVersion);
  return group ? `${o.kind}.${version}.${group}` : o.kind;
};

/** groupOf is an apiVersion's group ('' for the core group). */
const groupOf = (apiVersion: string) => parseApiVersion(apiVersion).group;

/** get reads an object with kubectl, or undefined. */
async function get(kubeconfig: string, o: KubeObject): Promise<KubeObject | undefined> {
  const kind = typeOf(o);
  // A discovery cache of the case's own: kubectl does not look again for a kind missing from
  // a cached group-version (keda-manager's case caches operator.kyma-project.io/v1alpha1 without BtpOperator).
  const args = [
    'get',
    kind,
    o.metadata.name,
    '-o',
    'json',
    '--ignore-not-found',
    '--cache-dir',
    discoveryCache,
    ...(o.metadata.namespace ? ['-n', o.metadata.namespace] : []),
  ];
  const out = await kubectl(kubeconfig, args);
  return out.trim() ? (JSON.parse(out) as KubeObject) : undefined;
}

/**
 * getAll reads objects with kubectl, one call per namespace (a kubectl process is a tenth of
 * a CPU second, and a case reads each of its objects several times); an absent object has no
 * entry. A kind the cluster does not serve fails the whole call, so that group is read one by
 * one; with gone, such an object counts as absent (a custom resource whose CRD is gone).
 */
async function getAll(
  kubeconfig: string,
  objects: KubeObject[],
  gone = false,
): Promise<Map<KubeObject, KubeObject>> {
  const found = new Map<KubeObject, KubeObject>();
  for (const [ns, group] of Map.groupBy(objects, (o) => o.metadata.namespace ?? '')) {
    const args = [
      'get',
      ...group.map((o) => `${typeOf(o)}/${o.metadata.name}`),
      '-o',
      'json',
      '--ignore-not-found',
      '--cache-dir',
      discoveryCache,
      ...(ns ? ['-n', ns] : []),
    ];
    let out: string;
    try {
      out = await kubectl(kubeconfig, args);
    } catch {
      for (const o of group) {
        const x = await (gone ? leftOf(kubeconfig, o) : get(kubeconfig, o));
        if (x) found.set(o, x);
      }
      continue;
    }
    const listed = out.trim() ? (JSON.parse(out) as KubeObject & { items?: KubeObject[] }) : undefined;
    const items = !listed ? [] : listed.kind === 'List' ? listed.items! : [listed];
    for (const o of group) {
      const x = items.find(
        (i) =>
          i.kind === o.kind &&
          groupOf(i.apiVersion) === groupOf(o.apiVersion) &&
          i.metadata.name === o.metadata.name,
      );
      if (x) found.set(o, x);
    }
  }
  return found;
}

/** comparable drops what differs between any two clusters: identity, times, managers, our marks, controller-filled fields. */
function comparable(o: KubeObject): unknown {
  const {
    uid: _u,
    resourceVersion: _r,
    creationTimestamp: _c,
    managedFields: _m,
    generation: _g,
    ...metadata
  } = o.metadata;
  const ours = (m: Record<string, string> | undefined) =>
    Object.fromEntries(
      Object.entries(m ?? {}).filter(
        ([k]) =>
          !k.startsWith('kcp-sync.kyma-project.io/') &&
          k !== 'deployment.kubernetes.io/revision' &&
          !k.startsWith('pv.kubernetes.io/') &&
          !k.startsWith('volume.'),
      ),
    );
  const spec = o.spec && typeof o.spec === 'object' ? { ...(o.spec as Record<string, unknown>) } : o.spec;
  // Allocated per cluster: Service IPs and node ports, a claim's bound volume.
  if (o.kind === 'Service' && spec && typeof spec === 'object') {
    const sp = spec as Record<string, unknown>;
    delete sp.clusterIP;
    delete sp.clusterIPs;
    sp.ports = (sp.ports as Record<string, unknown>[] | undefined)?.map(({ nodePort: _n, ...p }) => p);
  }
  if (o.kind === 'PersistentVolumeClaim' && spec && typeof spec === 'object')
    delete (spec as Record<string, unknown>).volumeName;
  if (o.kind === 'PersistentVolume' && spec && typeof spec === 'object')
    delete (spec as Record<string, unknown>).claimRef;
  const { status: _s, metadata: _md, ...rest } = o;
  return {
    ...rest,
    spec,
    metadata: { ...metadata, labels: ours(metadata.labels), annotations: ours(metadata.annotations) },
  };
}

/** applyLikeKubectl applies each item text with kubectl as a user would, in install order; returns the refusals by item. */
async function applyLikeKubectl(items: SyncItem[], texts: Map<string, string>): Promise<Map<string, string>> {
  const refused = new Map<string, string>();
  const ordered = [...items].sort(
    (a, b) => installRank(objectOf(texts.get(a.name)!).kind) - installRank(objectOf(texts.get(b.name)!).kind),
  );
  const foundation = ordered.filter((i) =>
    ['Namespace', 'CustomResourceDefinition'].includes(objectOf(texts.get(i.name)!).kind),
  );
  const rest = ordered.filter((i) => !foundation.includes(i));
  for (const i of foundation)
    await kubectl(
      oracle,
      ['apply', '--server-side', '--cache-dir', discoveryCache, '-f', '-'],
      texts.get(i.name)!,
    ).catch((e: Error) => refused.set(i.name, e.message));
  for (const i of foundation) {
    const o = objectOf(texts.get(i.name)!);
    if (o.kind !== 'CustomResourceDefinition' || refused.has(i.name)) continue;
    // kubectl wait fails on a CRD that has no conditions yet.
    await eventually(
      () =>
        kubectl(oracle, [
          'wait',
          '--for',
          'condition=established',
          `crd/${o.metadata.name}`,
          '--timeout=60s',
        ]),
      60_000,
      250,
    );
  }
  const crds = new Set(
    foundation
      .map(
        (i) =>
          objectOf(texts.get(i.name)!) as KubeObject & { spec: { group: string; names: { kind: string } } },
      )
      .filter((o) => o.kind === 'CustomResourceDefinition')
      .map((o) => `${o.spec.group}/${o.spec.names.kind}`),
  );
  for (const i of rest) {
    // A custom resource's kind may take a moment to be served after its CRD is established;
    // one whose CRD the case does not bring is refused at once.
    const o = objectOf(texts.get(i.name)!);
    await eventually(
      () =>
        kubectl(
          oracle,
          ['apply', '--server-side', '--cache-dir', discoveryCache, '-f', '-'],
          texts.get(i.name)!,
        ),
      crds.has(`${groupOf(o.apiVersion)}/${o.kind}`) ? 10_000 : 0,
      500,
    ).catch((e: Error) => refused.set(i.name, e.message));
  }
  applied.push(...items.filter((i) => !refused.has(i.name)).map((i) => texts.get(i.name)!));
  return refused;
}

/** applies reads the server-side applies and deletes an SKR has carried out, by series (verb, resource, ...). */
async function applies(kubeconfig: string): Promise<Map<string, number>> {
  const metrics = await kubectl(kubeconfig, ['get', '--raw', '/metrics']);
  const series = new Map<string, number>();
  for (const line of metrics.split('\n')) {
    // Requests the server carried out (2xx): an item kubectl refuses too is
    // tried again on every tick, as Flux does on every interval, and is refused every time.
    if (
      !line.startsWith('apiserver_request_total{') ||
      !/verb="(APPLY|DELETE)"/.test(line) ||
      !/code="2\d\d"/.test(line)
    )
      continue;
    const at = line.lastIndexOf(' ');
    series.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return series;
}

/** diffLikeCli runs the built kcp-sync diff over a SyncResource's text against an SKR (as a person would) and returns its items. */
function diffLikeCli(text: string, kubeconfig: string): Promise<ItemDiff[]> {
  const bin = join(import.meta.dirname, '..', 'dist', 'cli', 'kcp-sync.js');
  return new Promise((resolve, reject) => {
    const child = execFile(
      process.execPath,
      [bin, 'diff', '-', '--kubeconfig', kubeconfig, '-o', 'json'],
      { env: { ...process.env, SYNC_PROTECTED_NAMESPACES: '' }, maxBuffer: 16 << 20 },
      (_err, stdout, stderr) => {
        try {
          resolve(
            (JSON.parse(stdout) as { syncResources: { items: ItemDiff[] }[] }).syncResources.flatMap(
              (r) => r.items,
            ),
          );
        } catch {
          reject(new Error(`kcp-sync diff: ${stderr}`));
        }
      },
    );
    child.stdin!.end(text);
  });
}

/** grown lists the series that grew from before to after. */
const grown = (before: Map<string, number>, after: Map<string, number>) =>
  [...after]
    .filter(([k, v]) => v > (before.get(k) ?? 0))
    .map(([k, v]) => `${k} +${v - (before.get(k) ?? 0)}`);

beforeAll(async () => {
  s = await startStack('realworld', { env: { SYNC_PROTECTED_NAMESPACES: '' } }, { clusters: true });
  [product, oracle] = s.skr as [string, string];
}, 300_000);

afterAll(async () => {
  await s?.stop();
});

describe('the real-world corpus', () => {
  it('validate reads every SyncResource of the corpus without a finding (kcp-sync validate uses the same reader)', () => {
    const config = { ...parseConfig({}), protectedNamespaces: [] };
    for (const file of FILES) {
      const report = validateText(
        readFileSync(join(corpusDir, file), 'utf8'),
        file,
        config,
        syncResourceSpecSchema(),
      );
      // The 667 KB CRD is over an item's text limit, and validate says so: it ships by resourceFrom.
      const findings = report.findings.filter(
        (f) =>
          !(
            file === 'keda-release-scaledjobs-crd.yaml' && /Too long|over the limit of 262144/.test(f.message)
          ),
      );
      expect({ file, findings }).toEqual({ file, findings: [] });
    }
  });

  it.each(RW)(
    '%s ends where kubectl apply --server-side ends, writes nothing over three resyncs, and leaves nothing once deleted',
    async (file) => {
      const sr = read(file)!;
      discoveryCache = join(s.stateDir, 'kubectl-cache', file);
      const texts = await shipLarge(sr);
      sr.metadata.namespace = s.ns;
      const refused = await applyLikeKubectl(sr.spec.items, texts);
      await kubectl(s.kcp, ['apply', '--server-side', '-f', '-'], JSON.stringify(sr));
      try {
        const settled = await settle(sr, 180_000);
        await compare(sr, texts, refused, settled!);
        // kcp-sync diff reads the corpus as the product does: nothing to change, kubectl's refusals as errors.
        const original = read(file)!;
        original.metadata.namespace = s.ns;
        const diffs = await diffLikeCli(JSON.stringify(original), product);
        const expected = original.spec.items.map((i) => {
          const status = settled!.status?.items?.find((x) => x.name === i.name);
          // Offline, the 667 KB text is over an item's limit (the pipeline reads it by resourceFrom).
          const outcome =
            refused.has(i.name) || Buffer.byteLength(i.resource!) > MAX_ITEM
              ? 'error'
              : status?.reason === 'NotFound'
                ? 'not found'
                : 'unchanged';
          return { item: i.name, outcome };
        });
        expect(diffs.map((d) => ({ item: d.item, outcome: d.outcome }))).toEqual(expected);
      } finally {
        // Deleted also after a failed comparison: a failure stays this case's alone. The next
        // revision of Flux's SSA inputs is an update of the same SyncResource.
        if (file !== 'fluxcd-pkg-ssa.yaml') {
          await removeAndCheck(sr);
          await cleanOracle();
        }
      }
    },
    420_000,
  );

  it("applied together on one Kyma, objects several name are shared: the kyma-system Namespace four name alike is Ready on each, manager-role and manager-rolebinding keep one SyncResource's contents and the others' items are Conflict; deleted in any order, nothing of theirs is left", async () => {
    // fluxcd-pkg-ssa-rev2.yaml is the next revision of fluxcd-pkg-ssa.yaml (the same SyncResource).
    const srs = FILES.filter((f) => f !== 'fluxcd-pkg-ssa-rev2.yaml').map((f) => read(f)!);
    discoveryCache = join(s.stateDir, 'kubectl-cache', 'together');
    const texts = new Map<string, Map<string, string>>();
    for (const sr of srs) {
      texts.set(sr.metadata.name, await shipLarge(sr));
      sr.metadata.namespace = s.ns;
      await kubectl(s.kcp, ['apply', '--server-side', '-f', '-'], JSON.stringify(sr));
    }
    const settled = new Map<string, SyncResource>();
    for (const sr of srs) settled.set(sr.metadata.name, (await settle(sr, 300_000))!);
    /** naming lists, per SyncResource, its item naming kind/name and that item's text. */
    const naming = (kind: string, name: string) =>
      srs.flatMap((sr) =>
        sr.spec.items.flatMap((i) => {
          const text = texts.get(sr.metadata.name)!.get(i.name)!;
          const o = objectOf(text);
          if (o.kind !== kind || o.metadata.name !== name) return [];
          const status = settled.get(sr.metadata.name)!.status!.items!.find((x) => x.name === i.name)!;
          return [{ sr: sr.metadata.name, item: i.name, text, status }];
        }),
      );
    // The Namespace four name alike: shared, Ready on each.
    const ns = naming('Namespace', 'kyma-system');
    expect(ns.length).toBeGreaterThanOrEqual(4);
    expect(new Set(ns.map((n) => canonical(objectOf(n.text)))).size).toBe(1);
    expect(ns.map((n) => [n.sr, n.status.state])).toEqual(ns.map((n) => [n.sr, 'Ready']));
    // Named by three with different contents: one SyncResource's contents stay, the others are
    // Conflict naming a field and that SyncResource.
    for (const [kind, name] of [
      ['ClusterRole', 'manager-role'],
      ['ClusterRoleBinding', 'manager-rolebinding'],
    ] as const) {
      const named = naming(kind, name);
      expect({ kind, count: named.length }).toEqual({ kind, count: 3 });
      const winners = named.filter((n) => n.status.state === 'Ready');
      expect({ kind, winners: winners.length }).toEqual({ kind, winners: 1 });
      for (const n of named.filter((x) => x !== winners[0]))
        expect({ kind, sr: n.sr, reason: n.status.reason, message: n.status.message }).toEqual({
          kind,
          sr: n.sr,
          reason: 'Conflict',
          message: expect.stringMatching(
            new RegExp(`field.* \\..* by SyncResource ${s.ns}/${winners[0]!.sr}; nothing was forced`),
          ),
        });
      const live = await get(product, objectOf(winners[0]!.text));
      const want = objectOf(winners[0]!.text);
      expect({ kind, rules: live?.rules, subjects: live?.subjects, roleRef: live?.roleRef }).toEqual({
        kind,
        rules: want.rules,
        subjects: want.subjects,
        roleRef: want.roleRef,
      });
    }
    // Deleted in an order of their own (not the order they came in): nothing of theirs is left.
    const order = [...srs].sort(
      (a, b) =>
        (a.metadata.name.length % 3) - (b.metadata.name.length % 3) ||
        b.metadata.name.localeCompare(a.metadata.name),
    );
    const synced = srs.flatMap((sr) => settled.get(sr.metadata.name)!.status?.synced ?? []);
    // One after another, a resync apart, not each to its end: a Namespace is finalized only once
    // every API group answers discovery, and keda-release's APIService (served by a Pod that
    // never runs on the KWOK Node) answers none until keda-release itself is gone.
    for (const sr of order) {
      await kubectl(s.kcp, ['delete', 'syncresource', sr.metadata.name, '-n', s.ns, '--wait=false']);
      await sleep(2_000);
    }
    for (const sr of order) await waitSr(s, sr.metadata.name, (x) => expect(x).toBeUndefined(), 300_000);
    await eventually(async () => expect(await leftOver(synced)).toEqual([]), 180_000, 1_000);
  }, 900_000);
});

/** settle waits until every item of sr has its outcome for the current generation: none on its way. */
const settle = (sr: SyncResource, timeoutMs: number) =>
  waitSr(
    s,
    sr.metadata.name,
    (x) => {
      expect(x?.status?.observedGeneration).toBe(x?.metadata.generation);
      expect(x?.status?.items?.filter((i) => i.state === 'Processing' || i.state === 'Deleting')).toEqual([]);
      expect(x?.status?.items).toHaveLength(sr.spec.items.length);
    },
    timeoutMs,
  );

/**
 * shipLarge returns every item's text by item name, and ships an item over the 256 KiB of
 * resource by reference (resourceFrom), gzip-compressed in a labelled ConfigMap.
 */
async function shipLarge(sr: SyncResource): Promise<Map<string, string>> {
  const texts = new Map<string, string>();
  for (const [n, i] of sr.spec.items.entries()) {
    texts.set(i.name, i.resource!);
    if (Buffer.byteLength(i.resource!) <= MAX_ITEM) continue;
    const cm = `${sr.metadata.name}-${n}`;
    await kubectl(
      s.kcp,
      ['apply', '--server-side', '-f', '-'],
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: cm, namespace: s.ns, labels: { [SYNC_SOURCE_LABEL]: 'true' } },
        binaryData: { 'resource.yaml.gz': gzipSync(i.resource!).toString('base64') },
      }),
    );
    delete i.resource;
    i.resourceFrom = { configMapKeyRef: { name: cm, key: 'resource.yaml.gz' } };
  }
  return texts;
}

/** compare checks every item against kubectl's outcome, then that three resync ticks write nothing. */
async function compare(
  sr: SyncResource,
  texts: Map<string, string>,
  refused: Map<string, string>,
  settled: SyncResource,
): Promise<void> {
  // Refused items are left out: kubectl reads no object of a kind the cluster does not serve.
  const objects = new Map(
    sr.spec.items.filter((i) => !refused.has(i.name)).map((i) => [i.name, objectOf(texts.get(i.name)!)]),
  );
  const [theirsAll, oursAll] = await Promise.all([
    getAll(oracle, [...objects.values()]),
    getAll(product, [...objects.values()]),
  ]);
  for (const i of sr.spec.items) {
    const status = settled?.status?.items?.find((x) => x.name === i.name);
    const o = objects.get(i.name)!;
    if (refused.has(i.name)) {
      expect({ item: i.name, state: status?.state, kubectl: refused.get(i.name) }).toEqual({
        item: i.name,
        state: 'Error',
        kubectl: expect.any(String),
      });
      continue;
    }
    expect({
      item: i.name,
      state: status?.state,
      message: status?.state === 'Ready' ? '' : status?.message,
    }).toEqual({ item: i.name, state: 'Ready', message: '' });
    const theirs = theirsAll.get(o);
    const ours = oursAll.get(o);
    expect({ item: i.name, object: ours && comparable(ours) }).toEqual({
      item: i.name,
      object: theirs && comparable(theirs),
    });
  }
  // Three resync ticks (2 s apart) then write nothing to the SKR, and nothing to the status
  // but what the SKR's own controllers moved meanwhile: an item's health, to its object's
  // health at that moment (a claim bound at the controller-manager's pace). If health moved,
  // the window starts again once the status holds, at most three windows in all.
  for (let window = 1; ; window++) {
    const quiet = await settledStatus(sr, objects);
    const before = {
      writes: await applies(product),
      rv: quiet.metadata.resourceVersion,
      status: quiet.status,
    };
    await sleep(7_000);
    const after = await waitSr(s, sr.metadata.name, () => undefined);
    expect({ window, writes: grown(before.writes, await applies(product)) }).toEqual({ window, writes: [] });
    if (after?.metadata.resourceVersion === before.rv) return;
    const moved = (after?.status?.items ?? []).filter(
      (i) => !isDeepStrictEqual(i.health, before.status?.items?.find((b) => b.name === i.name)?.health),
    );
    expect({ health: moved.length > 0, rest: unmoved(after?.status) }).toEqual({
      health: true,
      rest: unmoved(before.status),
    });
    for (const i of moved) {
      const ours = await get(product, objectOf(texts.get(i.name)!));
      expect({ item: i.name, health: i.health?.status }).toEqual({
        item: i.name,
        health: ours && healthOf(ours).status,
      });
    }
    expect(window, 'health moved in each of three windows').toBeLessThan(3);
  }
}

/** unmoved is what of a status only the product moves: the items but their health, the inventory, the generation seen. */
const unmoved = (status: SyncResource['status']) => ({
  items: status?.items?.map(({ health: _health, ...rest }) => rest),
  synced: status?.synced,
  observedGeneration: status?.observedGeneration,
});

/**
 * settledStatus waits until a SyncResource is settled (the first resync reports Created as
 * Unchanged, Pods have started on the SKR's KWOK Node, podinfo's HorizontalPodAutoscaler
 * has scaled its Deployment up to its minimum): its status holds for 10 s, five resync
 * ticks, and each item reports the health its object has in the SKR, by the same rules. An
 * object whose health moved on while the status held is reported by the SKR source's next
 * event, so the two are compared until they agree. objects are the items kubectl accepted,
 * by name, as compare read them.
 */
async function settledStatus(sr: SyncResource, objects: Map<string, KubeObject>): Promise<SyncResource> {
  let last = '';
  let since = 0;
  return eventually(
    async () => {
      const polled = await readSr(s, sr.metadata.name);
      expect(polled?.status?.items?.filter((i) => i.reason === 'Created' || i.reason === 'Applied')).toEqual(
        [],
      );
      const rv = polled!.metadata.resourceVersion!;
      if (rv !== last) [last, since] = [rv, Date.now()];
      if (Date.now() - since < 10_000) throw new Error(`status not held yet (resourceVersion ${rv})`);
      const x = await getSr(s, sr.metadata.name);
      expect(x?.metadata.resourceVersion).toBe(rv);
      const live = await getAll(product, [...objects.values()]);
      for (const [item, o] of objects) {
        const status = x?.status?.items?.find((y) => y.name === item);
        const ours = live.get(o);
        expect({ item, health: status?.health?.status }).toEqual({
          item,
          health: ours && healthOf(ours).status,
        });
      }
      return x!;
    },
    180_000,
    1_000,
  );
}

/** applied are the texts kubectl applied to the oracle SKR since it was last cleaned (Flux's two revisions are one case's). */
const applied: string[] = [];

/** cleanOracle deletes what kubectl applied, in reverse install order, and waits until it is gone: the next case starts from an empty SKR, as the product's does. */
async function cleanOracle(): Promise<void> {
  const texts = applied
    .splice(0)
    .sort((a, b) => installRank(objectOf(b).kind) - installRank(objectOf(a).kind));
  // One kubectl for all, in the stream's order. It does not wait once it met an error, so
  // the wait is ours.
  await kubectl(
    oracle,
    ['delete', '--ignore-not-found', '--wait=false', '--cache-dir', discoveryCache, '-f', '-'],
    texts.join('\n---\n'),
  ).catch(() => undefined);
  const objects = texts.map(objectOf);
  await eventually(
    async () => expect([...(await getAll(oracle, objects, true)).keys()]).toEqual([]),
    120_000,
    1_000,
  );
}

type Entry = { apiVersion: string; kind: string; namespace?: string; name: string };

/** idOf addresses an inventory entry's object for get. */
const idOf = (e: Entry): KubeObject => ({
  apiVersion: e.apiVersion,
  kind: e.kind,
  metadata: { name: e.name, ...(e.namespace ? { namespace: e.namespace } : {}) },
});

/** leftOf reads what is left of an object: a custom resource whose CRD is gone is gone too. */
const leftOf = (kubeconfig: string, id: KubeObject) =>
  get(kubeconfig, id).catch((err: Error) =>
    /doesn't have a resource type|no matches for kind/.test(err.message) ? undefined : Promise.reject(err),
  );

/** leftOver lists what is left in the product's SKR of inventory entries, each as kind/namespace/name, "(deleting)" when it is on its way. */
async function leftOver(entries: Entry[]): Promise<string[]> {
  const left = await getAll(product, entries.map(idOf), true);
  return [...left].map(
    ([id, o]) =>
      `${id.kind}/${id.metadata.namespace ?? ''}/${id.metadata.name}${o.metadata.deletionTimestamp ? ' (deleting)' : ''}`,
  );
}

/** removeAndCheck deletes the SyncResource and checks that nothing of what it synced is left. */
async function removeAndCheck(sr: SyncResource): Promise<void> {
  const synced = (await getSr(s, sr.metadata.name))?.status?.synced ?? [];
  await kubectl(s.kcp, ['delete', 'syncresource', sr.metadata.name, '-n', s.ns, '--wait=false']);
  await waitSr(s, sr.metadata.name, (x) => expect(x).toBeUndefined(), 180_000);
  // Gone, not only being deleted: a namespace's contents are deleted by the SKR's namespace
  // controller, and the next case counts the deletes an SKR serves.
  expect((await leftOver(synced)).filter((l) => !l.endsWith(' (deleting)'))).toEqual([]);
  await eventually(async () => expect(await leftOver(synced)).toEqual([]), 120_000, 1_000);
}
