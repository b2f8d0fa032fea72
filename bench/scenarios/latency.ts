// latency.ts: scenario 3, the latency of one edit (kubectl apply -> Ready), idle and under
// load, and where an edit's time goes under load.
import { spawn } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { SyncResource } from '../../lib/model.ts';
import { mapLimit } from '../../lib/concurrency.ts';
import { waitFor } from '../../infra/net.ts';
import { median, pct, sleep, type Bench } from '../context.ts';
import { readyAt, syncResourceFor } from '../workload.ts';

/** editLatency makes EDITS edits idle, then EDITS more while bulk creates run, then EDITS more while mass deletions run. */
export async function editLatency(b: Bench): Promise<void> {
  const { row, S, NS, EDITS, rt, create, bulk, waitReady, kymaOf } = b;
  console.log('3. latency');
  // Latency targets: one SyncResource per edit under load, so edits overlap freely.
  await create(
    Array.from({ length: EDITS }, (_, i) => {
      const o = syncResourceFor(5_000 + i, NS, 'kcp-system', kymaOf(i));
      o.metadata.name = `lat-${i}`;
      o.metadata.labels = { 'bench-batch': 'lat' };
      return o;
    }),
  );
  await waitReady('lat-', EDITS);
  const { edit, kubectlMs, marks } = editor(b);
  const idle: number[] = [];
  for (let i = 0; i < EDITS; i++) idle.push(await edit(0, 100 + i));
  const kubectlIdle = kubectlMs.splice(0);
  marks.length = 0;
  row(
    '3 latency',
    `idle, kubectl apply -> Ready (${EDITS} edits) p50`,
    `${median(idle).toFixed(0)} ms`,
    '<= 300 ms',
  );
  row('3 latency', 'idle p99', `${pct(idle, 99).toFixed(0)} ms`);
  row('3 latency', 'idle: of which kubectl apply itself, p50', `${median(kubectlIdle).toFixed(0)} ms`);
  // Load: scenario 1 (bulk creates of S SyncResources, one after another) running the
  // whole time while an operator makes the edits one after another, each on its own
  // SyncResource. (Fifty overlapping edits would measure fifty kubectl processes
  // competing with each other as much as the product.)
  let loading = true;
  let rounds = 0;
  const load = (async () => {
    while (loading) await bulk(10_000 + rounds++ * S, S, `load${rounds}-`);
  })();
  // Its failure is thrown where it is awaited, after the edits, not as an unhandled rejection.
  load.catch(() => {});
  await sleep(1_000);
  const loaded: number[] = [];
  try {
    for (let i = 0; i < EDITS; i++) loaded.push(await edit(i, 1_000 + i));
  } catch (err) {
    // The round in flight ends before the stack is stopped: its requests would fail after.
    loading = false;
    await load.catch(() => {});
    throw err;
  }
  loading = false;
  row(
    '3 latency',
    `under load (bulk creates of ${S} SyncResources running: ${rounds} rounds) p50`,
    `${median(loaded).toFixed(0)} ms`,
  );
  row('3 latency', 'under load p99', `${pct(loaded, 99).toFixed(0)} ms`, '<= 2 s');
  row('3 latency', 'under load: slowest edit', `${Math.max(...loaded).toFixed(0)} ms`);
  row(
    '3 latency',
    'under load: of which kubectl apply itself, p50 / p99',
    `${median(kubectlMs).toFixed(0)} / ${pct(kubectlMs, 99).toFixed(0)} ms`,
  );
  await timeline(b, marks);
  await load;
  await rt.broker.idle(120_000);
  kubectlMs.length = 0;
  await underDeletions(b, edit, kubectlMs);
}

/**
 * underDeletions makes EDITS edits one after another while mass deletions run: rounds of S
 * SyncResources created (not timed, no edit meanwhile), then all deleted at once (32
 * requests at a time), with edits made until the round's SyncResources are gone (their
 * finalizers removed after their objects were deleted in the SKRs).
 */
async function underDeletions(
  b: Bench,
  edit: (i: number, rev: number) => Promise<number>,
  kubectlMs: number[],
): Promise<void> {
  const { row, S, EDITS, rt, bulk, kcp, srPath } = b;
  const times: number[] = [];
  let rounds = 0;
  while (times.length < EDITS) {
    const prefix = `del${rounds}-`;
    const from = 30_000 + rounds++ * S;
    await bulk(from, S, prefix);
    await rt.broker.idle(60_000);
    const names = Array.from({ length: S }, (_, j) => `${prefix}${from + j}`);
    const query = { labelSelector: `bench-batch=${prefix.replace(/-$/, '')}`, resourceVersion: '0' };
    let gone = false;
    const deletions = (async () => {
      await mapLimit(names, 32, (n) => kcp.client.call('DELETE', srPath(n)));
      await waitFor(
        `${prefix}: deleted`,
        async () =>
          (await kcp.client.call<{ items: unknown[] }>('GET', srPath(), { query })).items.length === 0,
        900_000,
        undefined,
        500,
      );
      gone = true;
    })();
    await sleep(500);
    while (!gone && times.length < EDITS) times.push(await edit(times.length, 2_000 + times.length));
    await deletions;
  }
  row(
    '3 latency',
    `under deletions (all of ${S} SyncResources deleted at once: ${rounds} rounds) p50`,
    `${median(times).toFixed(0)} ms`,
  );
  row('3 latency', 'under deletions p99', `${pct(times, 99).toFixed(0)} ms`, '<= 2 s');
  row(
    '3 latency',
    'under deletions: of which kubectl apply itself, p50 / p99',
    `${median(kubectlMs).toFixed(0)} / ${pct(kubectlMs, 99).toFixed(0)} ms`,
  );
  await rt.broker.idle(120_000);
}

/** Mark is one edit under load: when kubectl began and ended, and when Ready was seen. */
interface Mark {
  name: string;
  generation: number;
  start: number;
  kubectlDone: number;
  ready: number;
}

/** editor makes edit(i, rev): lat-i applied at revision rev with kubectl, timed until Ready at the new generation. */
function editor(b: Bench) {
  const { NS, kcp, set, kymaOf, srPath } = b;
  const kcpFile = set.kcp.kubeconfigFile;
  const kubectlMs: number[] = [];
  const marks: { name: string; generation: number; start: number; kubectlDone: number; ready: number }[] = [];
  /**
   * seenReady watches lat-i (as `kubectl wait` does) and resolves with the time it is
   * first seen Ready at a generation at least the one `generation` resolves to;
   * opened() is called with the watch's first event (the object as it is). A watch the
   * API server ends early (it closes one whose reader falls behind, as this process may
   * under load) is opened again, as `kubectl wait` does, from the object as it is then.
   */
  const seenReady = async (
    name: string,
    generation: Promise<number>,
    opened: () => void,
  ): Promise<number> => {
    const until = Date.now() + 120_000;
    const abort = new AbortController();
    try {
      while (Date.now() < until) {
        let why = '';
        for await (const { type, object: o } of kcp.client.watch<SyncResource>(
          srPath(),
          { fieldSelector: `metadata.name=${name}`, timeoutSeconds: '120' },
          abort.signal,
        )) {
          // The API server ends a watch it gives up on with an ERROR event (a Status).
          if (type === 'ERROR') {
            why = `: ${(o as unknown as { message?: string }).message ?? JSON.stringify(o)}`;
            continue;
          }
          const seen = Date.now();
          opened();
          if (readyAt(o) && o.metadata.generation! >= (await generation)) return seen;
        }
        console.log(`  ${name}: the watch ended before Ready${why}; watching again`);
        await sleep(100);
      }
      throw new Error(`${name}: not Ready within 120 s`);
    } finally {
      abort.abort();
    }
  };
  const edit = async (i: number, rev: number) => {
    const sr = syncResourceFor(5_000 + i, NS, 'kcp-system', kymaOf(i), rev);
    sr.metadata.name = `lat-${i}`;
    sr.metadata.labels = { 'bench-batch': 'lat' };
    // The watch opens first (its first event is the object as it is), so no change is missed.
    let setGeneration!: (g: number) => void;
    const generation = new Promise<number>((r) => (setGeneration = r));
    let ready!: Promise<number>;
    await new Promise<void>((opened, failed) => {
      ready = seenReady(sr.metadata.name, generation, opened);
      ready.catch(failed);
    });
    const t0 = performance.now();
    const start = Date.now();
    let out = '';
    await new Promise<void>((resolve, reject) => {
      const p = spawn(
        'kubectl',
        [
          '--kubeconfig',
          kcpFile,
          'apply',
          '--server-side',
          '--force-conflicts',
          '--field-manager=bench',
          '-o',
          'jsonpath={.metadata.generation}',
          '-f',
          '-',
        ],
        { stdio: ['pipe', 'pipe', 'inherit'] },
      );
      p.stdout.on('data', (d: Buffer) => (out += d.toString()));
      p.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`kubectl exited ${code}`))));
      p.stdin.end(JSON.stringify(sr));
    });
    kubectlMs.push(performance.now() - t0);
    const kubectlDone = Date.now();
    setGeneration(Number(out));
    const readyTime = await ready;
    marks.push({ name: `lat-${i}`, generation: Number(out), start, kubectlDone, ready: readyTime });
    return readyTime - start;
  };
  return { edit, kubectlMs, marks };
}

/**
 * timeline says where an edit's time goes under load, from the functions' logs: kubectl
 * done -> cluster resolved -> items applied -> status handled -> Ready seen by the
 * watcher. Each step's line carries ms, the time its handler took; the rest of a hop is
 * delivery (watch, broker, HTTP) and waiting in the process.
 */
async function timeline(b: Bench, marks: Mark[]): Promise<void> {
  const { row, stateDir } = b;
  const logged = new Map<string, { time: number; ms: number }>();
  for (const f of await readdir(join(stateDir, 'logs'))) {
    if (!f.startsWith('function-')) continue;
    for (const line of (await readFile(join(stateDir, 'logs', f), 'utf8')).split('\n')) {
      if (!line.includes('"kcp-system/lat-')) continue;
      const j = JSON.parse(line) as {
        time: number;
        ms: number;
        msg: string;
        syncResource: string;
        generation?: number;
      };
      const key = `${j.syncResource}/${j.generation}/${j.msg}`;
      if (j.generation !== undefined && !logged.has(key)) logged.set(key, { time: j.time, ms: j.ms });
    }
  }
  const hops: Record<string, { total: number[]; handler: number[] }> = {};
  const hop = (name: string, total: number, handler?: number) => {
    const h = (hops[name] ??= { total: [], handler: [] });
    h.total.push(total);
    if (handler !== undefined) h.handler.push(handler);
  };
  for (const m of marks) {
    const at = (msg: string) => logged.get(`kcp-system/${m.name}/${m.generation}/${msg}`);
    const [r, a, s] = [at('cluster resolved'), at('items applied'), at('status handled')];
    if (r === undefined || a === undefined || s === undefined) continue;
    hop('event -> cluster resolved', r.time - m.kubectlDone, r.ms);
    hop('resolved -> items applied', a.time - r.time, a.ms);
    hop('applied -> status written', s.time - a.time, s.ms);
    hop('status -> Ready seen', m.ready - s.time);
  }
  for (const [name, { total, handler }] of Object.entries(hops)) {
    const of =
      handler.length > 0
        ? `; in the handler ${median(handler).toFixed(0)} / ${pct(handler, 99).toFixed(0)} ms`
        : '';
    row(
      '3 latency',
      `under load: ${name}, p50 / p99 (${total.length} edits)`,
      `${median(total).toFixed(0)} / ${pct(total, 99).toFixed(0)} ms${of}`,
    );
  }
}
