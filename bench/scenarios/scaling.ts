// scaling.ts: scenario 8 (full runs only), the time per SyncResource of bulk creates of
// 100, 300 and 1,000.
import type { Bench } from '../context.ts';

/** scaling times bulk creates of growing size (not in --quick). */
export async function scaling(b: Bench): Promise<void> {
  const { row, bulk } = b;
  const { quick } = b.opts;
  if (!quick) {
    console.log('8. scaling');
    const per: number[] = [];
    let from = 20_000;
    for (const n of [100, 300, 1000]) {
      const t = (await bulk(from, n, `scale${n}-`)).readyMs;
      from += n;
      per.push(t / n);
      row('8 scaling', `S=${n}: time per SyncResource`, `${(t / n).toFixed(1)} ms`);
    }
    row('8 scaling', 'ratio S=1000 / S=100 per SyncResource', (per[2]! / per[0]!).toFixed(2), '<= 1.5');
  }
}
