// The SKR source: a long-running adapter, as Knative's ApiServerSource adapter is for the
// KCP (knative.yaml: the Deployment sync-skr-source, K_SINK from a SinkBinding). It watches
// the SKRs of the Kymas this replica is given (lib/skr/shard.ts) for the objects the
// SyncResources hold there and posts skr.changed events to the broker (lib/skr/source.ts);
// from the SyncResources it watches anyway it posts their changes (lib/skr/changes.ts).
// Served on PORT: /healthz (ready once the KCP is listed), /watches (what it watches).
import { hostname } from 'node:os';
import { emitterFor } from 'cloudevents';
import { parseConfig } from '../lib/config.ts';
import { KubeClient } from '../lib/kube/client.ts';
import { credentialsFromFile, inClusterCredentials } from '../lib/kube/credentials.ts';
import type { Logger } from '../lib/pipeline/deps.ts';
import { sinkTransport } from '../lib/pipeline/setup.ts';
import { Membership, ownerOf } from '../lib/skr/shard.ts';
import { Changes } from '../lib/skr/changes.ts';
import { SkrSource } from '../lib/skr/source.ts';
import { kymaHome } from '../lib/policy/tenancy.ts';

const env = process.env;
// node:http as require gives it: an ESM import reads all its exports, among them the lazy
// WebSocket ones, which load Node's own copy of undici (1.5 MiB) for nothing.
const { createServer } = process.getBuiltinModule('node:http');
const line = (level: string) => (fields: Record<string, unknown>, msg: string) =>
  process.stdout.write(`${JSON.stringify({ level, time: new Date().toISOString(), msg, ...fields })}\n`);
const log: Logger = { info: line('info'), warn: line('warn'), error: line('error') };

async function main(): Promise<void> {
  const config = parseConfig(env);
  if (!env.K_SINK) throw new Error('K_SINK is not set (the SinkBinding gives it)');
  const creds = env.KUBECONFIG ? credentialsFromFile(env.KUBECONFIG) : inClusterCredentials(env);
  const kcp = KubeClient.create(creds, { name: 'kcp', qps: config.kcpQps, burst: config.kcpBurst });
  const emit = emitterFor(sinkTransport(env.K_SINK, env));
  const post = async (e: Parameters<typeof emit>[0]) => void (await emit(e));
  // The SyncResources it lists for the SKR watches are the source of their own changes too.
  const changes = new Changes(post, log, (ns) => kymaHome(ns, config));
  const source = new SkrSource({ kcp, config, emit: post, log, syncResources: changes });
  const identity = env.POD_NAME || env.HOSTNAME || hostname();
  const namespace = config.controlPlaneNamespaces[0]!;
  let ready = false;
  // Its Lease is applied from start() on; /watches names the members it sees.
  const membership = new Membership({
    // A client of its own, as client-go's leader election has: a renewal never waits behind
    // the source's reads (hundreds at once when Kymas move between replicas), which let the
    // Lease lapse and the Kymas move again (`npm run bench -- --scale --kymas 1000`).
    kcp: KubeClient.create(creds, { name: 'kcp-lease' }),
    namespace,
    identity,
    log,
    onChange: (members, active) => {
      const mine = new Map<string, boolean>();
      const owns = (kyma: string) => {
        let m = mine.get(kyma);
        if (m === undefined) mine.set(kyma, (m = active && ownerOf(kyma, members) === identity));
        return m;
      };
      source.shard(owns);
      changes.shard(owns);
    },
    watching: () => {
      const w = source.watched();
      return `${w.kymas} Kymas, ${w.watches} watches, ${w.objects} objects${w.unwatched ? `, ${w.unwatched} Kymas over capacity` : ''}`;
    },
  });
  const server = serve(source, changes, identity, () => ready, membership);
  await new Promise<void>((r) => server.listen(Number(env.PORT ?? 8080), r));
  // Nothing is watched until this replica knows its share.
  source.shard(() => false);
  await source.start();
  await membership.start();
  ready = true;
  log.info({ identity, namespace }, 'SKR source started');
  const shutdown = async () => {
    await membership.stop().catch(() => {});
    await source.stop();
    server.close();
    process.exit(0);
  };
  process.once('SIGTERM', () => void shutdown());
  process.once('SIGINT', () => void shutdown());
}

/** serve answers /healthz (ready once the KCP is listed) and /watches (what this replica watches, the members it shares the Kymas with, and whether it takes its share yet). */
function serve(
  source: SkrSource,
  changes: Changes,
  identity: string,
  ready: () => boolean,
  membership: Membership,
) {
  return createServer((req, res) => {
    if (req.url === '/healthz') {
      res.writeHead(ready() ? 200 : 503).end(ready() ? 'ok' : 'starting');
    } else if (req.url === '/watches') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          identity,
          ...membership.current(),
          ...source.watched(),
          stats: { ...source.stats, changes: changes.stats },
          kymas: source.status(),
        }),
      );
    } else res.writeHead(404).end();
  });
}

main().catch((err: unknown) => {
  log.error({ error: err instanceof Error ? err.message : String(err) }, 'SKR source failed to start');
  process.exit(1);
});
