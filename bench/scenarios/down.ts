// down.ts: scenario 13, an SKR that stops answering: what it costs while down, how soon
// it is caught up.
import { KYMA_NAME_LABEL } from '../../lib/model.ts';
import { sleep, type Bench } from '../context.ts';
import { scrape } from '../scale.ts';

/**
 * downScenario: skr-1's API server is killed with every SyncResource of kyma-1 Ready (the
 * bulk's and 100 more), and resync ticks are fired every TICK_MS for DOWN_MS, as the
 * PingSource would: deliveries (and redeliveries), runs by outcome (sync_runs_total) and
 * the product's CPU over that time. Then it is started again: one tick, and the time
 * until all are Ready (target: within one interval).
 */
export async function downScenario(b: Bench): Promise<void> {
  const { row, K, kcp, set, rt, ports, bulk, waitReadyOnce, srPath, cpuNow, settle } = b;
  const { quick } = b.opts;
  const TICK_MS = 60_000;
  const DOWN_MS = quick ? 2 * TICK_MS : 10 * TICK_MS;
  await bulk(30_000, 100 * K, 'down-');
  await settle();
  const onKyma = (
    await kcp.client.call<{ items: unknown[] }>('GET', srPath(), {
      query: { labelSelector: `${KYMA_NAME_LABEL}=kyma-1` },
      headers: { accept: 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1' },
    })
  ).items.length;
  const runsNow = async () => {
    const out: Record<string, number> = {};
    for (const [svc, port] of Object.entries(ports))
      for (const m of (await scrape(svc, port)).matchAll(/^sync_runs_total\{([^}]*)\} (\d+)/gm)) {
        const outcome = /outcome="([^"]*)"/.exec(m[1]!)?.[1] ?? '';
        out[outcome] = (out[outcome] ?? 0) + Number(m[2]);
      }
    return out;
  };
  const product = (cpu: Record<string, number>) =>
    Object.entries(cpu)
      .filter(([g]) => g.startsWith('sync-'))
      .reduce((a, [, v]) => a + v, 0);
  const before = {
    stats: { ...rt.broker.stats },
    runs: await runsNow(),
    cpu: product(await cpuNow()),
  };
  await set.killApiServer('skr-1');
  try {
    const t0 = performance.now();
    let ticks = 0;
    while (performance.now() - t0 < DOWN_MS) {
      rt.ping[0]!.fire();
      ticks++;
      await sleep(Math.min(TICK_MS, DOWN_MS - (performance.now() - t0)));
    }
    await settle();
    const runs = await runsNow();
    const d = (k: string) => (runs[k] ?? 0) - (before.runs[k] ?? 0);
    const stats = rt.broker.stats;
    row(
      '13 SKR down',
      `${onKyma} SyncResources on the SKR, ${DOWN_MS / 60_000} min down, ${ticks} resync ticks: deliveries / redeliveries / dead letters`,
      `${stats.delivered - before.stats.delivered} / ${stats.retries - before.stats.retries} / ${stats.deadLettered - before.stats.deadLettered}`,
    );
    row(
      '13 SKR down',
      'runs: unreachable / not started (the batch found the SKR down) / done (the other Kymas)',
      `${d('unreachable')} / ${d('skipped')} / ${d('done')}`,
    );
    row(
      '13 SKR down',
      // Every run of kyma-1's SyncResources while its SKR is down ends unreachable ("done" are the other Kymas').
      `runs per SyncResource of kyma-1 per resync tick`,
      (d('unreachable') / onKyma / ticks).toFixed(2),
      '<= 2',
    );
    row(
      '13 SKR down',
      'CPU of the functions while down, per minute',
      `${((product(await cpuNow()) - before.cpu) / (DOWN_MS / 60_000)).toFixed(2)} s`,
    );
  } finally {
    await set.restartApiServer('skr-1');
  }
  const t1 = performance.now();
  rt.ping[0]!.fire();
  await waitReadyOnce('down-', 100 * K, 10 * TICK_MS);
  row(
    '13 SKR down',
    'back up: one resync tick -> all Ready',
    `${((performance.now() - t1) / 1000).toFixed(1)} s`,
    '<= one interval',
  );
}
