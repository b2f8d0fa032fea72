// resync.ts: scenario 4, a resync that finds nothing to do (requests and writes it costs),
// and scenario 5, drift: 10% of the synced objects edited or deleted in the SKRs, then
// resync ticks until every one is corrected.
import { resourcePath } from '../../lib/kube/discovery.ts';
import { getObject, mustFind } from '../../lib/kube/objects.ts';
import { mapLimit } from '../../lib/concurrency.ts';
import { sleep, type Bench } from '../context.ts';
import { QUIET_MS } from '../scale.ts';

const diff = (a: Record<string, number>, b: Record<string, number>, k: string) => (b[k] ?? 0) - (a[k] ?? 0);

/** noopResync measures a resync of every SyncResource when nothing changed; returns how many there are. */
export async function noopResync(b: Bench): Promise<number> {
  const { row, kcp, rt, srPath, settle, requests } = b;
  console.log('4. no-op resync');
  const total = await kcp.client.call<{ items: unknown[] }>('GET', srPath()).then((l) => l.items.length);
  // Quiet periods of QUIET_MS (bench/scale.ts): a measurement never ends inside a tick.
  await settle();
  // Warm-up: the first resync after creation records items as Unchanged instead of
  // Created (one status write each); the second is the no-op being measured.
  rt.ping[0]!.fire();
  await sleep(300);
  await settle();
  const before = await requests();
  const t0 = performance.now();
  rt.ping[0]!.fire();
  await sleep(300);
  await settle();
  const ms = performance.now() - t0 - 300 - QUIET_MS;
  const after = await requests();
  row(
    '4 no-op resync',
    `${total} SyncResources: SKR requests per SyncResource`,
    (diff(before, after, 'skr:read') / total + diff(before, after, 'skr:write') / total).toFixed(2),
    '<= 1',
  );
  row(
    '4 no-op resync',
    'KCP requests per SyncResource',
    ((diff(before, after, 'kcp:read') + diff(before, after, 'kcp:write')) / total).toFixed(2),
  );
  row(
    '4 no-op resync',
    'writes anywhere (SKR + KCP)',
    String(diff(before, after, 'skr:write') + diff(before, after, 'kcp:write')),
    '0',
  );
  row('4 no-op resync', 'time for the whole resync', `${(ms / 1000).toFixed(2)} s`);

  return total;
}

/** driftResync drifts 10% of the objects and resyncs until they are corrected. */
export async function driftResync(b: Bench, total: number): Promise<void> {
  const { row, S, K, NS, skrs, rt, settle, requests } = b;
  console.log('5. drift');
  const victims = Array.from({ length: Math.ceil(S / 10) }, (_, j) => j * 10).filter((i) => i < S);
  await mapLimit(victims, 16, async (i) => {
    const skr = skrs[i % K]!;
    const info = await mustFind(skr, 'v1', 'ConfigMap');
    if (i % 20 === 0) await skr.client.call('DELETE', resourcePath(info, NS, `b${i}-a`));
    else
      await skr.client.call('PATCH', resourcePath(info, NS, `b${i}-a`), {
        body: { data: { rev: 'drifted' } },
        contentType: 'application/merge-patch+json',
      });
  });
  const before = await requests();
  const corrected = async () =>
    (
      await mapLimit(victims, 16, async (i) => {
        const skr = skrs[i % K]!;
        const o = await getObject(skr, await mustFind(skr, 'v1', 'ConfigMap'), NS, `b${i}-a`);
        return (o?.data as { rev?: string } | undefined)?.rev === '1';
      })
    ).every(Boolean);
  // Snapshots taken before a tick began confirm nothing for it (since), so one tick
  // corrects everything; when a tick has run its course and objects are still drifted,
  // tick again (and say so).
  const t0 = performance.now();
  let ticks = 0;
  let done = false;
  while (!done) {
    rt.ping[0]!.fire();
    ticks++;
    await sleep(300);
    await settle();
    done = await corrected();
  }
  const ms = performance.now() - t0 - ticks * (300 + QUIET_MS);
  await settle();
  const after = await requests();
  row(
    '5 drift',
    `${victims.length} objects edited or deleted (10%): time until corrected`,
    `${(ms / 1000).toFixed(2)} s`,
  );
  row('5 drift', 'resync ticks needed', String(ticks));
  row(
    '5 drift',
    'SKR requests per SyncResource (all ticks)',
    ((diff(before, after, 'skr:read') + diff(before, after, 'skr:write')) / total).toFixed(2),
  );
}
