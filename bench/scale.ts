// scale.ts is the benchmark's scenario 10 (issue 16): S SyncResources over K Kymas, each
// Kyma with its own access Secret (so its own SKR client) pointing at one of the local SKR
// API servers, its objects in a namespace of its own there. Measures bulk create at 100 and
// at S, the no-op resync (requests per SyncResource, deliveries per Kyma, writes, time),
// drift of 1 % of the objects, and the memory and SKR clients of every function process.
//   npm run bench -- --scale        S=10,000 over K=1,000 (this scenario only)
//   npm run bench -- --quick        S=1,000 over K=100 (after the other scenarios)
//   npm run bench -- --scale --quick  S=1,000 over K=100 (this scenario only)
import { readFile } from 'node:fs/promises';
import type { Runtime } from '../infra/runtime/index.ts';
import { applyObjects, kymaObjects } from '../infra/kcp-setup.ts';
import { resourcePath } from '../lib/kube/discovery.ts';
import { getObject, mustFind, type Cluster } from '../lib/kube/objects.ts';
import { syncResourceInfo } from '../lib/kcp.ts';
import { mapLimit } from '../lib/concurrency.ts';
import { syncResourceFor } from './workload.ts';
import { cpuMsPer } from './procs.ts';

/** ScaleContext is what the scenario needs of the benchmark's stack. */
export interface ScaleContext {
  kcp: Cluster;
  skrs: Cluster[];
  skrKubeconfigs: string[];
  rt: Runtime;
  /** metricsPorts maps "service/replica" to its Prometheus port. */
  metricsPorts: Record<string, number>;
  row: (scenario: string, figure: string, value: string, target?: string) => void;
  /** waitReady waits for n Ready SyncResources of a batch, firing a resync tick when deliveries stop; returns the ticks it fired. */
  waitReady: (prefix: string, n: number, timeoutMs?: number) => Promise<number>;
  /** cpu returns CPU seconds used so far by each group of processes of the stack. */
  cpu: () => Promise<Record<string, number>>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const SCENARIO = '10 scale';

/**
 * scrape reads one process's Prometheus text, retrying; a process that cannot be read
 * fails the benchmark (counting it as zero once halved the request figures of a run).
 */
export async function scrape(svc: string, port: number): Promise<string> {
  for (let attempt = 1; ; attempt++) {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(10_000) });
      if (res.ok) return await res.text();
      throw new Error(`HTTP ${res.status}`);
    } catch (err) {
      if (attempt >= 3)
        throw new Error(
          `metrics of ${svc} (port ${port}) unreadable: ${err instanceof Error ? err.message : String(err)}`,
        );
      await sleep(1_000);
    }
  }
}

/**
 * addRequests adds a process's request counter (metric, in its Prometheus text) to out, by
 * cluster (kcp when isKcp says so of a sample's labels, else skr) and read (GET) or write.
 */
export function addRequests(
  out: Record<string, number>,
  text: string,
  metric: string,
  isKcp: (labels: Record<string, string | undefined>) => boolean,
): void {
  for (const m of text.matchAll(new RegExp(`^${metric}\\{([^}]*)\\} ([\\d.e+]+)`, 'gm'))) {
    const labels = Object.fromEntries([...m[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    const key = `${isKcp(labels) ? 'kcp' : 'skr'}:${labels.method === 'GET' ? 'read' : 'write'}`;
    out[key] = (out[key] ?? 0) + Number(m[2]);
  }
}

/** metrics sums the functions' Prometheus counters the benchmark reports. */
export async function metrics(
  ctx: ScaleContext,
): Promise<{ requests: Record<string, number>; clients: Record<string, number>; evictions: number }> {
  const requests: Record<string, number> = {};
  const clients: Record<string, number> = {};
  let evictions = 0;
  for (const [svc, port] of Object.entries(ctx.metricsPorts)) {
    const text = await scrape(svc, port);
    addRequests(requests, text, 'sync_api_requests_total', (labels) => labels.cluster === 'kcp');
    for (const m of text.matchAll(/^sync_client_cache_clients(?:\{[^}]*\})? (\d+)/gm))
      clients[svc] = (clients[svc] ?? 0) + Number(m[1]);
    for (const m of text.matchAll(/^sync_client_cache_evictions_total(?:\{[^}]*\})? (\d+)/gm))
      evictions += Number(m[1]);
  }
  return { requests, clients, evictions };
}

/** QUIET_MS is settle's quiet period. */
export const QUIET_MS = 3_000;

/**
 * settle waits until the broker has had nothing to deliver for three seconds: a resync
 * walks thousands of names before its first post, and a shorter quiet period would end
 * a measurement inside a tick.
 */
export async function settle(rt: Runtime): Promise<void> {
  let last = -1;
  while (rt.broker.stats.received !== last) {
    last = rt.broker.stats.received;
    await rt.broker.idle(600_000);
    await sleep(QUIET_MS);
  }
}

/** scaleScenario runs scenario 10 with S SyncResources over K Kymas. */
export async function scaleScenario(ctx: ScaleContext, S: number, K: number): Promise<void> {
  const { kcp, skrs, rt, row } = ctx;
  console.log(`10. scale: S=${S} over K=${K}`);
  const kyma = (k: number) => `scale-${k}`;
  const nsOf = (k: number) => `scale-${k}`;
  // Each Kyma: an access Secret of its own for SKR k % n, a namespace of its own there.
  for (let from = 0; from < K; from += 100) {
    const ks = Array.from({ length: Math.min(100, K - from) }, (_, j) => from + j);
    await applyObjects(
      kcp,
      ks.flatMap((k) => kymaObjects(kyma(k), ctx.skrKubeconfigs[k % skrs.length]!)),
    );
    await mapLimit(ks, 16, (k) =>
      applyObjects(skrs[k % skrs.length]!, [
        { apiVersion: 'v1', kind: 'Namespace', metadata: { name: nsOf(k) } },
      ]),
    );
  }
  await settle(rt);
  const srPath = resourcePath(syncResourceInfo, 'kcp-system');
  let next = 0;
  let catchUpTicks = 0;
  const bulk = async (n: number, batch: string): Promise<number> => {
    const objs = Array.from({ length: n }, () => {
      const i = next++;
      const k = i % K;
      const o = syncResourceFor(100_000 + i, nsOf(k), 'kcp-system', kyma(k));
      o.metadata.name = `${batch}-${i}`;
      o.metadata.labels = { 'bench-batch': batch };
      return o;
    });
    const t0 = performance.now();
    await mapLimit(objs, 32, (o) => kcp.client.call('POST', srPath, { body: o }));
    // A burst of thousands of creations outruns the ApiServerSource adapter: waitReady fires
    // the resync tick production's PingSource would, and says how many it fired.
    catchUpTicks += await ctx.waitReady(`${batch}-`, n, 3_600_000);
    return performance.now() - t0;
  };
  // What the SKR source posted and holds, summed over its replicas.
  const source = async () => {
    let posts = 0;
    const out: { kymas: number; watches: number; objects: number; rss: number }[] = [];
    for (const a of rt.skrSources) {
      const w = (await (await fetch(`${a.url}watches`)).json()) as {
        kymas: unknown[];
        watches: number;
        objects: number;
        stats: { posts: number };
      };
      posts += w.stats.posts;
      const rss =
        Number(/VmRSS:\s+(\d+)/.exec(await readFile(`/proc/${a.proc.pid}/status`, 'utf8'))![1]) / 1024;
      out.push({ kymas: w.kymas.length, watches: w.watches, objects: w.objects, rss });
    }
    return { posts, replicas: out };
  };
  // Bulk create: 100 first, then S.
  const small = await bulk(100, 'scalesmall');
  const posts0 = (await source()).posts;
  const large = await bulk(S, 'scale');
  await settle(rt);
  row(
    SCENARIO,
    `bulk create S=${S}: events the SKR source posted meanwhile (its own writes come back as watch events: none should be posted but health moving on)`,
    String((await source()).posts - posts0),
  );
  row(SCENARIO, 'bulk create S=100: time per SyncResource', `${(small / 100).toFixed(1)} ms`);
  row(SCENARIO, `bulk create S=${S}: time per SyncResource`, `${(large / S).toFixed(1)} ms`);
  row(
    SCENARIO,
    `bulk create: time per SyncResource at S=${S} / at S=100`,
    (large / S / (small / 100)).toFixed(2),
    '<= 1.5',
  );
  row(
    SCENARIO,
    'bulk create: resync ticks fired to catch up creations the adapter dropped (its watch closed as unresponsive)',
    String(catchUpTicks),
  );
  await settle(rt);

  const total = (
    await kcp.client.call<{ items: { metadata: { labels?: Record<string, string> } }[] }>('GET', srPath, {
      headers: { accept: 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1' },
    })
  ).items;
  const kymas = new Set(total.map((s) => s.metadata.labels?.['operator.kyma-project.io/kyma-name'])).size;
  // Warm-up: the first resync after creation records items as Unchanged instead of Created.
  rt.ping[0]!.fire();
  await sleep(500);
  await settle(rt);
  const before = await metrics(ctx);
  const cpu0 = await ctx.cpu();
  const delivered0 = rt.broker.stats.delivered;
  const t0 = performance.now();
  rt.ping[0]!.fire();
  await sleep(500);
  await settle(rt);
  const ms = performance.now() - t0 - 500 - QUIET_MS;
  const after = await metrics(ctx);
  const cpu1 = await ctx.cpu();
  const d = (k: string) => (after.requests[k] ?? 0) - (before.requests[k] ?? 0);
  const label = `${total.length} SyncResources over ${kymas} Kymas`;
  row(
    SCENARIO,
    `no-op resync (${label}): KCP requests per SyncResource`,
    ((d('kcp:read') + d('kcp:write')) / total.length).toFixed(3),
    '<= 0.3',
  );
  const delivered = rt.broker.stats.delivered - delivered0;
  row(
    SCENARIO,
    `no-op resync: broker deliveries per Kyma (${delivered} in all: the tick's one ping, then per Kyma)`,
    ((delivered - 1) / kymas).toFixed(2),
    '<= 2',
  );
  row(
    SCENARIO,
    'no-op resync: SKR requests per SyncResource',
    ((d('skr:read') + d('skr:write')) / total.length).toFixed(3),
    '<= 0.5',
  );
  row(SCENARIO, 'no-op resync: writes anywhere (SKR + KCP)', String(d('skr:write') + d('kcp:write')), '0');
  row(
    SCENARIO,
    `no-op resync: wall time`,
    `${(ms / 1000).toFixed(1)} s`,
    S >= 10_000 ? '<= 60 s' : undefined,
  );
  for (const [g, ms] of cpuMsPer(cpu0, cpu1, total.length))
    row(SCENARIO, `no-op resync: CPU ms per SyncResource, ${g}`, ms.toFixed(2));

  // Drift: 1 % of the SyncResources get their first ConfigMap edited in the SKR.
  const victims = Array.from({ length: Math.ceil(S / 100) }, (_, j) => j * 100);
  // The "scale" batch's SyncResource j is number 100 + j overall (after the 100 small ones).
  const where = (j: number) => {
    const i = 100 + j;
    return { skr: skrs[(i % K) % skrs.length]!, ns: nsOf(i % K), name: `b${100_000 + i}-a` };
  };
  const cmInfo = await mustFind(skrs[0]!, 'v1', 'ConfigMap');
  await mapLimit(victims, 16, async (i) => {
    const w = where(i);
    await w.skr.client.call('PATCH', resourcePath(cmInfo, w.ns, w.name), {
      body: { data: { rev: 'drifted' } },
      contentType: 'application/merge-patch+json',
      // A user's edit (the client's own user agent would name the product's former manager).
      query: { fieldManager: 'bench-user' },
    });
  });
  const corrected = async () =>
    (
      await mapLimit(victims, 16, async (i) => {
        const w = where(i);
        return (
          ((await getObject(w.skr, cmInfo, w.ns, w.name))?.data as { rev?: string } | undefined)?.rev === '1'
        );
      })
    ).every(Boolean);
  // The SKR source sees the edits: corrected with no tick (within 30 s), else ticks as before.
  const t1 = performance.now();
  let bySource = false;
  for (; performance.now() - t1 < 30_000; await sleep(100)) if ((bySource = await corrected())) break;
  row(
    SCENARIO,
    `drift: ${victims.length} objects edited (1 %), corrected by the SKR source with no tick, all within`,
    bySource ? `${((performance.now() - t1) / 1000).toFixed(1)} s` : 'not within 30 s',
    '<= 5 s',
  );
  let ticks = 0;
  while (!(await corrected()) && ticks < 5) {
    rt.ping[0]!.fire();
    ticks++;
    await sleep(500);
    await settle(rt);
  }
  if (ticks > 0) row(SCENARIO, 'drift: resync ticks it then took', String(ticks));
  await settle(rt);

  // A settled system: a minute with nothing to do. The SKR source posts nothing, nothing is
  // written, and the product's own processes (functions and the SKR source) use little CPU.
  const rest0 = { m: await metrics(ctx), cpu: await ctx.cpu(), src: await source(), at: performance.now() };
  await sleep(60_000);
  const rest1 = { m: await metrics(ctx), cpu: await ctx.cpu(), src: await source(), at: performance.now() };
  const dr = (k: string) => (rest1.m.requests[k] ?? 0) - (rest0.m.requests[k] ?? 0);
  row(
    SCENARIO,
    'settled, a minute: events posted by the SKR source',
    String(rest1.src.posts - rest0.src.posts),
    '0',
  );
  row(
    SCENARIO,
    'settled, a minute: writes anywhere (SKR + KCP)',
    String(dr('skr:write') + dr('kcp:write')),
    '0',
  );
  type Mark = { cpu: Record<string, number>; at: number };
  /** perMinute is the CPU seconds a minute that the process groups matching group spent between a and b. */
  const perMinute = (a: Mark, b: Mark, group: (g: string) => boolean) => {
    const sum = (c: Record<string, number>) =>
      Object.entries(c)
        .filter(([g]) => group(g))
        .reduce((n, [, v]) => n + v, 0);
    return `${(((sum(b.cpu) - sum(a.cpu)) * 60_000) / (b.at - a.at)).toFixed(2)} s`;
  };
  const own = (g: string) => g.startsWith('sync-');
  const groups = (a: Mark, b: Mark) =>
    Object.keys(b.cpu)
      .filter(own)
      .map((g) => `${g} ${perMinute(a, b, (x) => x === g)}`)
      .join(', ');
  row(
    SCENARIO,
    "settled: CPU of the product's own processes (functions, SKR source), per minute",
    perMinute(rest0, rest1, own),
    '<= 1 s',
  );
  row(SCENARIO, 'settled: of which, per minute (each process group, both replicas)', groups(rest0, rest1));
  // The minute after: what the first minute spent on the work before it (a function's
  // collection once idle, connections closed a minute after use) is done by then.
  await sleep(60_000);
  const rest2: Mark = { cpu: await ctx.cpu(), at: performance.now() };
  row(
    SCENARIO,
    "settled, the minute after: CPU of the product's own processes, per minute",
    perMinute(rest1, rest2, own),
  );
  row(SCENARIO, 'settled, the minute after: of which, per minute', groups(rest1, rest2));
  for (const [i, r] of rest1.src.replicas.entries())
    row(
      SCENARIO,
      `SKR source replica ${i}: Kymas, watches, objects watched; RSS (${K} Kymas in all)`,
      `${r.kymas}, ${r.watches}, ${r.objects}; ${r.rss.toFixed(0)} MiB`,
      '<= 300 MiB at 1,000',
    );

  // Memory and clients of every function process, after talking to every SKR.
  const m = await metrics(ctx);
  for (const f of rt.functions) {
    const rss =
      Number(/VmRSS:\s+(\d+)/.exec(await readFile(`/proc/${f.proc.pid}/status`, 'utf8'))![1]) / 1024;
    row(
      SCENARIO,
      `RSS of ${f.service} (replica ${f.replica}) after ${K} SKRs`,
      `${rss.toFixed(0)} MiB`,
      '<= 300 MiB',
    );
  }
  for (const [svc, n] of Object.entries(m.clients)) row(SCENARIO, `SKR clients cached by ${svc}`, String(n));
  row(SCENARIO, 'SKR clients evicted (all processes, whole run)', String(m.evictions));
}
