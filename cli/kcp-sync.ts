#!/usr/bin/env node
// kcp-sync: the module teams' CLI. `validate` checks SyncResource files offline with the
// product's own rules; `diff` shows what a reconcile would do in an SKR, writing nothing
// there: with an SKR kubeconfig directly, or with only KCP credentials through a preview
// SyncResource the product runs (lib/pipeline/preview.ts).
// A thin adapter: argument parsing and output here, the checks in lib/validate.ts and
// lib/diff.ts.
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { parseConfig, type Config } from '../lib/config.ts';
import { syncResourceSpecSchema } from '../lib/crd.ts';
import { CHANGES, diffSyncResource, type ItemDiff } from '../lib/diff.ts';
import { KubeClient } from '../lib/kube/client.ts';
import type { Credentials } from '../lib/kube/credentials.ts';
import { RestMapper } from '../lib/kube/discovery.ts';
import { SYNC_API_VERSION, type SyncResource } from '../lib/model.ts';
import { validateText, type ValidateReport } from '../lib/validate.ts';
import { readYamlDocuments } from '../lib/yaml.ts';
import type { SyncPolicy } from '../lib/policy/tenancy.ts';

const usage = {
  main: `kcp-sync: validate and diff SyncResources

Commands:
  kcp-sync validate FILE... [--policy P]     check SyncResource files offline
  kcp-sync diff FILE --kubeconfig SKR        show what a reconcile would do in that cluster
  kcp-sync diff FILE --kcp KCP               the same, through the KCP (no SKR credentials)

Run "kcp-sync <command> --help" for a command's options.`,
  validate: `kcp-sync validate FILE... [--policy P] [-o json]

Checks SyncResources offline with the product's own rules: the CRD's schema and rules,
the item parser, identities, restricted kinds and protected namespaces (from
SYNC_RESTRICTED_KINDS, SYNC_PROTECTED_NAMESPACES, SYNC_CONTROL_PLANE_NAMESPACES) and
duplicate objects. FILE may hold several documents; "-" reads standard input; documents
of other kinds are reported and skipped.

--policy P checks a team's SyncResources (in a namespace that is not a control-plane one,
or in none) against the SyncPolicy in file P, with the product's own rule: the namespace,
each item's strategy, kind and destination namespace (the scope of a kind that is not
built in is taken as namespaced offline; the product asks the SKR). The Kymas it allows
are not checked offline.

Each problem is printed with its SyncResource, item, state, reason and message: what the
product would write into the status (or why the API server would refuse the object).

Exit status: 0 clean, 1 problems found, 2 a file could not be read.`,
  diff: `kcp-sync diff FILE --kubeconfig SKR [--context C] [--policy P] [-o json]
       kcp-sync diff FILE --kcp KCP [--context C] [--timeout S] [-o json]

Shows, per item of each SyncResource in FILE, what a reconcile would do in the cluster of
the kubeconfig: create, update, adopt, delete, unchanged, conflict, restricted, not
found, or error; updates come with a unified diff of the fields the product owns, from a
server-side dry-run apply with its field manager. Secret values are masked. Nothing is
written. Objects pruned because an item was removed are not shown (that needs the
SyncResource's inventory in the control plane).

--policy P checks each item against the SyncPolicy in file P as the product would, after
the cluster's discovery: an item the policy refuses is shown restricted (NotPermitted).

--kcp KCP needs no access to the SKR: with the kubeconfig of the control plane (a module
team's own credentials, allowed to create SyncResources in the file's namespace), it
creates for each SyncResource a preview of it (spec.preview.of: its name; the product
computes the preview in the SKR by dry run and writes nothing there), waits for the
product to write status.preview (--timeout S, default 120), prints it and deletes the
preview. Items resourceFrom and dataFrom take their sources from the KCP, as a run does;
objects the SyncResource holds that no item names any more are shown pruned; the SKR's
policy for a team namespace applies as it will.

Exit status: 0 nothing would change, 1 something would change, 2 errors.`,
};

type Format = 'text' | 'json';

/** table aligns rows into columns for people. */
function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows
    .map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  '))
    .join('\n');
}

async function readInput(file: string): Promise<string> {
  if (file !== '-') return readFile(file, 'utf8');
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** readPolicy reads the one SyncPolicy of file. */
async function readPolicy(file: string): Promise<SyncPolicy> {
  const docs = readYamlDocuments(await readFile(file, 'utf8')) as Partial<SyncPolicy & { kind: string }>[];
  const policies = docs.filter((d) => d?.kind === 'SyncPolicy');
  if (policies.length !== 1) throw new Error(`${file} must hold one SyncPolicy, not ${policies.length}`);
  const p = policies[0]!;
  if (typeof p.metadata?.name !== 'string' || !Array.isArray(p.spec?.namespaces))
    throw new Error(`${file}: a SyncPolicy needs metadata.name and spec.namespaces`);
  return p as SyncPolicy;
}

async function validate(
  files: string[],
  format: Format,
  config: Config,
  policy: SyncPolicy | undefined,
): Promise<number> {
  const schema = syncResourceSpecSchema();
  const reports: ValidateReport[] = [];
  for (const file of files) reports.push(validateText(await readInput(file), file, config, schema, policy));
  const findings = reports.flatMap((r) => r.findings);
  if (format === 'json') {
    console.log(JSON.stringify({ ok: findings.length === 0, reports }, null, 2));
  } else {
    for (const r of reports) {
      for (const s of r.skipped) console.log(`${r.source}: skipped ${s} (not a SyncResource)`);
      for (const u of r.unchecked) console.log(`${r.source}: rule not checked offline: ${u}`);
    }
    if (findings.length > 0) {
      console.log(
        table([
          ['FILE', 'SYNCRESOURCE', 'ITEM', 'STATE', 'REASON', 'MESSAGE'],
          ...findings.map((f) => [f.source, f.syncResource, f.item ?? '-', f.state, f.reason, f.message]),
        ]),
      );
    }
    const count = reports.reduce((n, r) => n + r.syncResources.length, 0);
    console.log(
      findings.length === 0
        ? `${count} SyncResources valid`
        : `${findings.length} problems in ${count} SyncResources`,
    );
  }
  return findings.length === 0 ? 0 : 1;
}

/** personCredentials reads a person's kubeconfig as kubectl would (files, credential plugins: their choice). */
async function personCredentials(path: string, context: string | undefined): Promise<Credentials> {
  const { KubeConfig } = await import('@kubernetes/client-node');
  const kc = new KubeConfig();
  kc.loadFromFile(path);
  if (context) kc.setCurrentContext(context);
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error(`kubeconfig ${path} has no cluster for context ${kc.getCurrentContext()}`);
  const opts: { ca?: Buffer; cert?: Buffer; key?: Buffer; headers?: Record<string, string> } = {};
  await kc.applyToHTTPSOptions(opts as never);
  const auth = opts.headers?.Authorization ?? opts.headers?.authorization;
  const token = auth?.replace(/^Bearer /, '');
  return {
    server: cluster.server.replace(/\/+$/, ''),
    ...(opts.ca ? { ca: Buffer.from(opts.ca) } : {}),
    ...(opts.cert ? { cert: Buffer.from(opts.cert) } : {}),
    ...(opts.key ? { key: Buffer.from(opts.key) } : {}),
    ...(token ? { token: () => token } : {}),
    insecure: cluster.skipTLSVerify === true,
    ...(cluster.tlsServerName ? { servername: cluster.tlsServerName } : {}),
  };
}

async function diff(
  file: string,
  through: { skr: string } | { kcp: string; timeoutMs: number },
  context: string | undefined,
  format: Format,
  config: Config,
  policy: SyncPolicy | undefined,
): Promise<number> {
  const docs = (readYamlDocuments(await readInput(file)) as SyncResource[]).filter(
    (d) => d?.apiVersion === SYNC_API_VERSION && d.kind === 'SyncResource',
  );
  if (docs.length === 0) throw new Error(`${file} holds no SyncResource`);
  const kubeconfig = 'skr' in through ? through.skr : through.kcp;
  const client = KubeClient.create(await personCredentials(kubeconfig, context), {
    name: 'skr' in through ? 'skr' : 'kcp',
  });
  const results: { syncResource: string; items: ItemDiff[] }[] = [];
  try {
    const skr = { client, mapper: new RestMapper(client) };
    for (const sr of docs) {
      sr.metadata.namespace ??= config.controlPlaneNamespaces[0];
      results.push({
        syncResource: `${sr.metadata.namespace}/${sr.metadata.name}`,
        items:
          'skr' in through
            ? await diffSyncResource(sr, skr, config, policy)
            : await previewInKcp(client, sr, through.timeoutMs),
      });
    }
  } finally {
    await client.close();
  }
  const all = results.flatMap((r) => r.items);
  if (format === 'json') {
    console.log(
      JSON.stringify({ changes: all.some((i) => CHANGES.has(i.outcome)), syncResources: results }, null, 2),
    );
  } else {
    for (const r of results) {
      console.log(`SyncResource ${r.syncResource}`);
      console.log(
        table([
          ['ITEM', 'OUTCOME', 'OBJECT', 'DETAIL'],
          ...r.items.map((i) => [
            i.item,
            i.outcome,
            i.object ?? '-',
            [i.reason, i.message].filter(Boolean).join(': ') || '-',
          ]),
        ]),
      );
      for (const i of r.items) if (i.diff && CHANGES.has(i.outcome)) console.log(i.diff);
    }
  }
  if (all.some((i) => i.outcome === 'error' || i.outcome === 'conflict')) return 2;
  return all.some((i) => CHANGES.has(i.outcome)) ? 1 : 0;
}

/** PREVIEW_SUFFIX ends the name of a preview kcp-sync diff --kcp creates. */
const PREVIEW_SUFFIX = '-preview-';

/** previewInKcp has the product compute sr's preview (spec.preview) and returns its items; the preview is deleted. */
async function previewInKcp(kcp: KubeClient, sr: SyncResource, timeoutMs: number): Promise<ItemDiff[]> {
  const ns = sr.metadata.namespace!;
  const base = `/apis/${SYNC_API_VERSION}/namespaces/${ns}/syncresources`;
  const name = `${sr.metadata.name.slice(0, 200)}${PREVIEW_SUFFIX}${Math.random().toString(36).slice(2, 7)}`;
  const created = await kcp.call<SyncResource>('POST', base, {
    body: {
      apiVersion: SYNC_API_VERSION,
      kind: 'SyncResource',
      metadata: { name, namespace: ns, labels: sr.metadata.labels ?? {} },
      spec: { ...sr.spec, preview: { of: sr.metadata.name } },
    },
  });
  try {
    const generation = created.metadata.generation ?? 1;
    const until = Date.now() + timeoutMs;
    for (;;) {
      const now = await kcp.call<SyncResource>('GET', `${base}/${name}`);
      const st = now.status;
      if (st?.preview?.observedGeneration === generation) return st.preview.items as ItemDiff[];
      // The product could not get to the SKR at all (no Kyma, no access, not permitted): its reason.
      if (st?.observedGeneration === generation && st.state === 'Error') {
        const why = st.conditions?.find((c) => c.type === 'Resources');
        throw new Error(`the preview of ${ns}/${sr.metadata.name} failed: ${why?.reason}: ${why?.message}`);
      }
      if (Date.now() > until)
        throw new Error(
          `no preview of ${ns}/${sr.metadata.name} within ${timeoutMs / 1000} s (is the product running?)`,
        );
      await new Promise((r) => setTimeout(r, 250));
    }
  } finally {
    await kcp.call('DELETE', `${base}/${name}`).catch(() => undefined);
  }
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: {
      help: { type: 'boolean', short: 'h' },
      output: { type: 'string', short: 'o' },
      kubeconfig: { type: 'string' },
      context: { type: 'string' },
      policy: { type: 'string' },
      kcp: { type: 'string' },
      timeout: { type: 'string' },
    },
  });
  if (command !== 'validate' && command !== 'diff') {
    console.log(usage.main);
    return command === undefined || command === '--help' || command === '-h' || command === 'help' ? 0 : 2;
  }
  if (values.help) {
    console.log(usage[command]);
    return 0;
  }
  const format = values.output === 'json' ? 'json' : values.output === undefined ? 'text' : undefined;
  if (!format) throw new Error(`-o ${values.output}: only json is supported`);
  const config = parseConfig();
  const policy = values.policy ? await readPolicy(values.policy) : undefined;
  if (command === 'validate') {
    if (positionals.length === 0)
      throw new Error('validate needs at least one FILE (or - for standard input)');
    return validate(positionals, format, config, policy);
  }
  if (positionals.length !== 1 || !(values.kubeconfig || values.kcp) || (values.kubeconfig && values.kcp))
    throw new Error('diff needs one FILE and either --kubeconfig (an SKR) or --kcp (the control plane)');
  const timeoutMs = Number(values.timeout ?? 120) * 1000;
  if (!(timeoutMs > 0)) throw new Error(`--timeout ${values.timeout}: a number of seconds`);
  const through = values.kcp ? { kcp: values.kcp, timeoutMs } : { skr: values.kubeconfig! };
  return diff(positionals[0]!, through, values.context, format, config, policy);
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (err) {
  console.error(`kcp-sync: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 2;
}
