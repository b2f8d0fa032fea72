// Drift you can trust, against a real SKR: manifests whose stored form differs from their
// text (quantities, int-or-string, empty maps, defaulted fields, key order, YAML number
// forms) are never drift — three resyncs write nothing anywhere — while a change by any
// other field manager to a field we own is reverted and named (manager and path), and a
// change to a field we do not own is left alone.
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { describeCorrection } from '../lib/changeset.ts';
import type { SyncItem } from '../lib/model.ts';
import { Harness } from './engine-harness.ts';

const item = Harness.item;

/** kubectl runs kubectl against SKR 2 as its admin, with an optional editor for `kubectl edit`. */
function kubectl(args: string[], opts: { stdin?: string; editor?: string } = {}): Promise<string> {
  const kubeconfig = `${inject('clusters').stateDir}/kubeconfig/skr-2.yaml`;
  return new Promise((resolve, reject) => {
    const child = execFile(
      'kubectl',
      ['--kubeconfig', kubeconfig, ...args],
      { env: { ...process.env, ...(opts.editor ? { KUBE_EDITOR: opts.editor } : {}) } },
      (err, stdout, stderr) =>
        err ? reject(new Error(`kubectl ${args.join(' ')}: ${stderr}`)) : resolve(stdout),
    );
    child.stdin!.end(opts.stdin ?? '');
  });
}

/** corpus returns manifests whose stored form differs from their text, each a different way. */
function corpus(ns: string): Record<string, string> {
  const m = (text: string) => text.replaceAll('NS', ns);
  return {
    'cm-empty-data': m(
      'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: empty-data, namespace: NS}\ndata: {}\n',
    ),
    'cm-empty-meta': m(
      'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: empty-meta, namespace: NS, labels: {}, annotations: {}}\ndata: {a: "1"}\n',
    ),
    'cm-key-order': m(
      'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: key-order\n  namespace: NS\n  labels: {z: "1", a: "2", m: "3"}\n  annotations: {y: "1", b: "2"}\ndata: {z: "1", a: "2"}\n',
    ),
    'cm-empty-binary': m(
      'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: empty-binary, namespace: NS}\nbinaryData: {}\ndata: {k: v}\n',
    ),
    'limitrange-millis': m(
      'apiVersion: v1\nkind: LimitRange\nmetadata: {name: millis, namespace: NS}\nspec:\n  limits:\n  - type: Container\n    default: {cpu: 1000m, memory: 1024Mi}\n    defaultRequest: {cpu: 0.5, memory: 536870912}\n',
    ),
    'limitrange-numbers': m(
      'apiVersion: v1\nkind: LimitRange\nmetadata: {name: numbers, namespace: NS}\nspec:\n  limits:\n  - type: Container\n    max: {cpu: 2, memory: 1e9}\n',
    ),
    'quota-spellings': m(
      'apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: spellings, namespace: NS}\nspec:\n  hard: {cpu: 2000m, memory: 2048Mi, pods: "10", persistentvolumeclaims: 1e1}\n',
    ),
    'quota-empty-scopes': m(
      'apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: scopes, namespace: NS}\nspec:\n  hard: {configmaps: 0x14}\n  scopes: []\n',
    ),
    'svc-defaults': m(
      'apiVersion: v1\nkind: Service\nmetadata: {name: defaults, namespace: NS}\nspec:\n  selector: {app: x}\n  ports:\n  - port: 80\n',
    ),
    'svc-int-or-string': m(
      'apiVersion: v1\nkind: Service\nmetadata: {name: int-or-string, namespace: NS}\nspec:\n  selector: {app: x}\n  ports:\n  - {name: http, port: 80, targetPort: 8080}\n  - {name: metrics, port: 9090, targetPort: metrics, protocol: TCP}\n',
    ),
    'deploy-defaults': m(
      'apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: defaults, namespace: NS}\nspec:\n  selector: {matchLabels: {app: d}}\n  template:\n    metadata: {labels: {app: d}}\n    spec:\n      containers:\n      - name: c\n        image: registry.local/app:1\n        resources: {requests: {cpu: 0.1, memory: 128974848}, limits: {cpu: 1, memory: 1Gi}}\n',
    ),
    'deploy-number-forms': m(
      'apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: number-forms, namespace: NS}\nspec:\n  replicas: 0x1\n  revisionHistoryLimit: 0o12\n  progressDeadlineSeconds: 6.0e2\n  selector: {matchLabels: {app: num}}\n  template:\n    metadata: {labels: {app: num}}\n    spec:\n      containers:\n      - {name: c, image: registry.local/app:1, ports: [{containerPort: 8080}]}\n',
    ),
    'pv-nfs': m(
      'apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: NS-nfs}\nspec:\n  capacity: {storage: 1024Mi}\n  accessModes: [ReadWriteMany]\n  nfs: {server: 10.0.0.1, path: /export}\n',
    ),
    'pvc-bytes': m(
      'apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: bytes, namespace: NS}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1073741824}}\n  storageClassName: NS-nfs\n',
    ),
    'storageclass-nfs': m(
      'apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: NS-nfs}\nprovisioner: nfs.csi.k8s.io\nparameters: {server: 10.0.0.1, share: /export}\nmountOptions: [nfsvers=4.1]\n',
    ),
    'namespace-labels': m('apiVersion: v1\nkind: Namespace\nmetadata: {name: NS-extra, labels: {team: a}}\n'),
    'netpol-empty-selector': m(
      'apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: empty-selector, namespace: NS}\nspec:\n  podSelector: {}\n  ingress: []\n',
    ),
    'pdb-percent': m(
      'apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: percent, namespace: NS}\nspec:\n  minAvailable: 50%\n  selector: {matchLabels: {app: d}}\n',
    ),
    'cronjob-defaults': m(
      'apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: defaults, namespace: NS}\nspec:\n  schedule: "*/5 * * * *"\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: OnFailure\n          containers: [{name: c, image: registry.local/job:1}]\n',
    ),
    'ingress-port': m(
      'apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: port, namespace: NS}\nspec:\n  rules:\n  - http:\n      paths:\n      - {path: /, pathType: Prefix, backend: {service: {name: defaults, port: {number: 80}}}}\n',
    ),
    'sa-empty-lists': m(
      'apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: empty-lists, namespace: NS}\nsecrets: []\nimagePullSecrets: []\n',
    ),
    'priorityclass-float': m(
      'apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: NS-float}\nvalue: 1e3\n',
    ),
    'role-empty': m(
      'apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: empty, namespace: NS, annotations: {}}\nrules: []\n',
    ),
    'hpa-defaults': m(
      'apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: defaults, namespace: NS}\nspec:\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: defaults}\n  maxReplicas: 3\n  metrics:\n  - type: Resource\n    resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}\n',
    ),
    'crd-defaults': m(
      'apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.NS.example.com}\nspec:\n  group: NS.example.com\n  names: {kind: Widget, plural: widgets}\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    subresources: {status: {}}\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec:\n            type: object\n            properties:\n              size: {type: string, default: small}\n              replicas: {type: integer, default: 1}\n              limit: {x-kubernetes-int-or-string: true, anyOf: [{type: integer}, {type: string}]}\n          status:\n            type: object\n            properties:\n              state: {type: string}\n              phase: {type: string}\n',
    ),
    'cr-defaulted': m(
      'apiVersion: NS.example.com/v1\nkind: Widget\nmetadata: {name: defaulted, namespace: NS}\nspec: {limit: "10"}\n',
    ),
    'job-generated': m(
      'apiVersion: batch/v1\nkind: Job\nmetadata: {name: generated, namespace: NS}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: registry.local/job:1}]\n',
    ),
  };
}

async function writesDuring(h: Harness, fn: () => Promise<void>): Promise<{ skr: number; kcp: number }> {
  const before = { skr: h.skr.client.writes, kcp: h.kcp.client.writes };
  await fn();
  return { skr: h.skr.client.writes - before.skr, kcp: h.kcp.client.writes - before.kcp };
}

describe('drift', () => {
  it('is never what the server normalizes: 28 non-canonical manifests, three resyncs, zero writes anywhere', async () => {
    // A name that is also a valid DNS label and group part (the corpus uses it in cluster-scoped names).
    const h = await new Harness('drift').init(1);
    const items: SyncItem[] = Object.entries(corpus(h.ns)).map(([name, resource]) => ({
      name,
      strategy: 'CreateAndSync',
      resource,
    }));
    expect(items.length).toBeGreaterThanOrEqual(25);
    // UpdateAndDelete keeps someone else's object in sync: no digest of ours is stored, a dry run confirms instead (no write).
    await kubectl(['apply', '-f', '-'], {
      stdin: `apiVersion: v1\nkind: LimitRange\nmetadata: {name: theirs, namespace: ${h.ns}}\nspec:\n  limits:\n  - type: Container\n    default: {cpu: 2}\n`,
    });
    items.push({
      name: 'uad-limits',
      strategy: 'UpdateAndDelete',
      resource: `apiVersion: v1\nkind: LimitRange\nmetadata: {name: theirs, namespace: ${h.ns}}\nspec:\n  limits:\n  - type: Container\n    default: {cpu: 1000m, memory: 1024Mi}\n`,
    });
    await h.put(items);
    let { sr } = await h.sync();
    expect(sr?.status?.items?.filter((i) => i.state !== 'Ready')).toEqual([]);
    ({ sr } = await h.sync());
    expect(sr?.status?.items?.filter((i) => i.reason !== 'Unchanged')).toEqual([]);
    for (let run = 0; run < 3; run++) {
      const writes = await writesDuring(h, async () => {
        const { sr: again, result } = await h.sync();
        expect(
          again?.status?.items?.filter((i) => i.reason !== 'Unchanged'),
          `run ${run}`,
        ).toEqual([]);
        expect(result.changes.filter((c) => c.action !== 'unchanged')).toEqual([]);
      });
      expect(writes, `run ${run}`).toEqual({ skr: 0, kcp: 0 });
    }
    expect(sr?.status?.synced?.every((e) => typeof e.digest === 'string' && e.digest.length > 0)).toBe(true);
    expect(
      JSON.parse(await kubectl(['get', 'limitrange', 'theirs', '-n', h.ns, '-o', 'json'])).spec.limits[0]
        .default,
    ).toEqual({ cpu: '1', memory: '1Gi' });
    await h.put([]);
    await h.sync();
  });

  it('reverts what other field managers change in our fields, names them and the path, and leaves their own fields alone', async () => {
    const h = await new Harness('drift-who').init(1);
    const cm = `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: owned, namespace: ${h.ns}}\ndata: {a: "1", b: "1"}\n`;
    const widgetCrd = corpus(h.ns)['crd-defaults']!;
    const status = `apiVersion: ${h.ns}.example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: ${h.ns}}\nstatus: {state: Ready}\n`;
    await h.put([
      { name: 'crd', strategy: 'CreateAndSync', resource: widgetCrd },
      { name: 'cm', strategy: 'CreateAndSync', resource: cm },
      {
        name: 'w',
        strategy: 'CreateAndSync',
        resource: `apiVersion: ${h.ns}.example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: ${h.ns}}\nspec: {size: large}\n`,
        subresource: status,
      },
    ]);
    await h.sync();
    await h.sync();
    const data = async () =>
      JSON.parse(await kubectl(['get', 'configmap', 'owned', '-n', h.ns, '-o', 'json'])).data as Record<
        string,
        string
      >;
    const check = async (how: string, manager: string, path: string) => {
      const { sr, result } = await h.sync();
      expect(item(sr, 'cm'), how).toMatchObject({ state: 'Ready', reason: 'Applied' });
      const c = result.changes.find((x) => x.item === 'cm')!;
      expect(c, how).toMatchObject({ drift: true, cause: { managers: [manager] } });
      expect(c.cause!.paths, how).toContain(path);
      expect(describeCorrection(c), how).toContain(`ConfigMap ${h.ns}/owned: `);
      expect(describeCorrection(c), how).toMatch(
        new RegExp(`${path.replace('.', '\\.')}.* changed by ${manager}; reverted$`),
      );
      expect((await data()).a, how).toBe('1');
      expect((await data()).b, how).toBe('1');
      // Reverted once: the next run writes nothing.
      const again = await writesDuring(h, async () => {
        await h.sync();
      });
      expect(again.skr, `${how}: settled`).toBe(0);
    };

    await kubectl(['edit', 'configmap', 'owned', '-n', h.ns], {
      editor: `sed -i -e 's/^  a: "1"/  a: edited/'`,
    });
    await check('kubectl edit', 'kubectl-edit', 'data.a');
    const file = join(tmpdir(), `${h.ns}-csa.yaml`);
    await writeFile(
      file,
      `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: owned, namespace: ${h.ns}}\ndata: {a: "1", b: client-side}\n`,
    );
    await kubectl(['apply', '-f', file]);
    await check('client-side kubectl apply', 'kubectl-client-side-apply', 'data.b');
    await kubectl(
      ['apply', '--server-side', '--force-conflicts', '--field-manager', 'other-operator', '-f', '-'],
      {
        stdin: `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: owned, namespace: ${h.ns}}\ndata: {a: ssa}\n`,
      },
    );
    await check('server-side apply by another manager', 'other-operator', 'data.a');
    await kubectl([
      'patch',
      'configmap',
      'owned',
      '-n',
      h.ns,
      '--field-manager',
      'patcher',
      '--type',
      'merge',
      '-p',
      '{"data":{"b":"patched"}}',
    ]);
    await check('kubectl patch --field-manager', 'patcher', 'data.b');

    // Fields we do not own: left alone, no drift, no write.
    await kubectl([
      'patch',
      'configmap',
      'owned',
      '-n',
      h.ns,
      '--field-manager',
      'patcher',
      '--type',
      'merge',
      '-p',
      '{"data":{"mine":"x"},"metadata":{"labels":{"theirs":"y"}}}',
    ]);
    const untouched = await writesDuring(h, async () => {
      const { result } = await h.sync();
      expect(result.changes.filter((c) => c.drift)).toEqual([]);
    });
    expect(untouched.skr).toBe(0);
    expect((await data()).mine).toBe('x');

    // A controller writing the status: a field of ours is written back, one of its own is not drift.
    await kubectl([
      'patch',
      'widget',
      'w',
      '-n',
      h.ns,
      '--subresource',
      'status',
      '--field-manager',
      'widget-controller',
      '--type',
      'merge',
      '-p',
      '{"status":{"phase":"Running"}}',
    ]);
    const own = await writesDuring(h, async () => {
      const { sr } = await h.sync();
      expect(item(sr, 'w')).toMatchObject({ reason: 'Unchanged' });
    });
    expect(own.skr).toBe(0);
    await kubectl([
      'patch',
      'widget',
      'w',
      '-n',
      h.ns,
      '--subresource',
      'status',
      '--field-manager',
      'widget-controller',
      '--type',
      'merge',
      '-p',
      '{"status":{"state":"Broken"}}',
    ]);
    const { sr } = await h.sync();
    expect(item(sr, 'w')).toMatchObject({ reason: 'Applied' });
    const w = JSON.parse(await kubectl(['get', 'widget', 'w', '-n', h.ns, '-o', 'json'])) as {
      status: Record<string, string>;
    };
    expect(w.status).toEqual({ state: 'Ready', phase: 'Running' });
    await h.put([]);
    await h.sync();
  });
});
