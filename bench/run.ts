// run.ts is `npm run bench` (`-- --quick` for the small version): the product on the
// local stack (real API servers, real function processes, the local event runtime),
// measured against a direct server-side-apply loop. Prints a table of figures and the
// targets they are held to. Figures only: nothing here asserts a time. It runs the
// scenarios in order, each a module of its own (bench/scenarios/, scale.ts, senders.ts,
// peer.ts, cost.ts), on one stack (context.ts).
import { mkdtemp, rm } from 'node:fs/promises';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { NODE_NAME } from '../infra/clusters.ts';
import { DEFAULT_REPLICAS, sourcesSettled } from '../infra/runtime/index.ts';
import { startBench, type Bench } from './context.ts';
import { scaleScenario } from './scale.ts';
import { costScenario } from './cost.ts';
import { latencyScenario } from './latency.ts';
import { writeRun } from './record.ts';
import { pipelineVerify, verifyCost } from './senders.ts';
import { peerComparison } from './peer.ts';
import { bulkCreate, directLimit } from './scenarios/throughput.ts';
import { editLatency } from './scenarios/latency.ts';
import { driftResync, noopResync } from './scenarios/resync.ts';
import { coldStart } from './scenarios/coldstart.ts';
import { cachedClients } from './scenarios/memory.ts';
import { rotation } from './scenarios/rotation.ts';
import { scaling } from './scenarios/scaling.ts';
import { healthScenario } from './scenarios/health.ts';
import { downScenario } from './scenarios/down.ts';

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    /** --scale runs scenario 10 alone at S=10,000 SyncResources over K=1,000 Kymas (with --quick: 1,000 over 100; bench/scale.ts). */
    scale: { type: 'boolean', default: false },
    /** --kymas N runs the scale scenario with one SyncResource per Kyma over N Kymas (the SKR source's cost per watched SKR). */
    kymas: { type: 'string' },
    /** --cost runs the cost scenario alone: KCP requests and CPU per SyncResource created, RSS of each function at rest (bench/cost.ts). */
    cost: { type: 'boolean', default: false },
    /** --latency runs the latency scenario alone: idle edits and drift on a small stack, and the KCP requests a drift costs (bench/latency.ts). */
    latency: { type: 'boolean', default: false },
    /** --throughput runs scenarios 1, 2 and 4 alone: the bulk create beside the direct loop (pipeline / direct), then a no-op resync; a few minutes. */
    throughput: { type: 'boolean', default: false },
    /** --edits runs scenario 3 alone: edits idle, under bulk creates and under mass deletions; a few minutes. */
    edits: { type: 'boolean', default: false },
    /** --cold-start runs scenario 6 alone (after the bulk create, whose SyncResource its first reconcile takes); a few minutes. */
    'cold-start': { type: 'boolean', default: false },
    /** --broker async runs on a broker that answers posts at once; the default is the channel-based Broker's semantics (infra/runtime/broker.ts). */
    broker: { type: 'string', default: 'channel' },
    /** --knative real runs on Knative Eventing's own controllers and data plane, each function behind queue-proxy (infra/runtime/real.ts). */
    knative: { type: 'string', default: 'emulated' },
    /** --oidc off runs knative: real without sender identity (authentication-oidc), to set its figures beside those with it. */
    oidc: { type: 'string', default: 'on' },
    /** --keep leaves the state directory (function logs, kubeconfigs) in place for inspection. */
    keep: { type: 'boolean', default: false },
    /** --peer off skips the side-by-side with Gardener's resource-manager (bench/peer.ts; built on first use); --peer only runs it alone. */
    peer: { type: 'string', default: 'on' },
    /** --cpu-prof DIR has every function process and SKR source replica write a V8 CPU profile into DIR when it stops (bench/profile.ts sums them). */
    'cpu-prof': { type: 'string' },
    /** --apiserver-prof DIR writes the KCP's and skr-1's API server CPU profiles over 15 s of the bulk create into DIR (go tool pprof -top reads them). */
    'apiserver-prof': { type: 'string' },
    /** --json FILE writes the run (commit, machine, options, every row) as JSON; bench/render.ts makes BENCHMARKS.md's table of it. */
    json: { type: 'string' },
  },
});
if (!['channel', 'async'].includes(args.broker))
  throw new Error(`--broker is channel or async, not ${args.broker}`);
if (!['emulated', 'real'].includes(args.knative))
  throw new Error(`--knative is emulated or real, not ${args.knative}`);
const quick = args.quick;
const scaleOnly = args.scale;
const brokerMode = args.broker as 'channel' | 'async';
const knative = args.knative as 'emulated' | 'real';
if (!['on', 'off'].includes(args.oidc)) throw new Error(`--oidc is on or off, not ${args.oidc}`);
const oidc = args.oidc === 'on';
const keep = args.keep;
if (!['on', 'off', 'only'].includes(args.peer))
  throw new Error(`--peer is on, off or only, not ${args.peer}`);
const peerMode = args.peer as 'on' | 'off' | 'only';
const rows: { scenario: string; figure: string; value: string; target?: string }[] = [];
// With --json the file is rewritten after every row: a run that stops leaves what it measured.
let saved = Promise.resolve();
const save = (complete: boolean) =>
  (saved = saved.then(() =>
    args.json ? writeRun(args.json, startedAt, runOptions(), rows, complete) : undefined,
  ));
const row = (scenario: string, figure: string, value: string, target?: string) => {
  rows.push({ scenario, figure, value, ...(target ? { target } : {}) });
  console.log(`  ${scenario} | ${figure}: ${value}${target ? ` (target ${target})` : ''}`);
  void save(false);
};
/** pct is the nearest-rank percentile: the smallest value with at least p% of the values at or below it. */

const startedAt = new Date();
/** alone: a run of a few scenarios by themselves (--throughput, --cold-start, --edits), with none of the rest. */
const alone = args.throughput || args['cold-start'] || args.edits;
const runOptions = () => ({
  quick,
  scale: scaleOnly,
  throughput: args.throughput,
  coldStart: args['cold-start'],
  edits: args.edits,
  cost: args.cost,
  latency: args.latency,
  broker: brokerMode,
  knative,
  oidc: oidc ? 'on' : 'off',
  peer: peerMode,
});
const table = () => {
  console.log('\n| scenario | figure | value | target |\n|---|---|---|---|');
  for (const r of rows) console.log(`| ${r.scenario} | ${r.figure} | ${r.value} | ${r.target ?? ''} |`);
};
console.log(
  `bench (${scaleOnly ? 'scale' : quick ? 'quick' : 'full'})${scaleOnly ? '' : `: S=${quick ? 60 : 300} K=${quick ? 2 : 3}`} on ${cpus().length} cores, ${Math.round(totalmem() / 2 ** 30)} GiB, ${knative === 'real' ? "Knative Eventing's own broker (MTChannelBasedBroker, in-memory channel) and queue-proxy" : `${brokerMode} broker stand-in`}, ${DEFAULT_REPLICAS} replicas per function`,
);
if (args.cost || args.latency) {
  if (args.cost) await costScenario(row);
  if (args.latency) await latencyScenario(row);
  table();
  await save(true);
  process.exit(0);
}
const stateDir = await mkdtemp(join(tmpdir(), 'kcp-sync-bench-'));
const benchOptions = {
  quick,
  brokerMode,
  knative,
  oidc,
  cpuProf: args['cpu-prof'],
  apiserverProf: args['apiserver-prof'],
};
let { bench, stop } = await startBench(benchOptions, stateDir, row);
const caughtUp = new Map<string, number>();
try {
  if (scaleOnly) await scaleOnlyRun(bench);
  else if (args.throughput) await throughputOnly(bench);
  else if (args['cold-start']) await coldStartOnly(bench);
  else if (args.edits) await editsOnly(bench);
  else if (peerMode !== 'only') await scenarios(bench);
  if (peerMode !== 'only' && !alone) await senderScenario(bench);
  if (!scaleOnly && !alone && peerMode !== 'off') {
    if (peerMode === 'on') {
      // Scenario 14 runs each side on clusters that hold only its own resources, as GRM's
      // side does: the scenarios before leave thousands of SyncResources (scenario 10's
      // over 100 more Kymas) whose watches and events the product would carry through it.
      for (const [b, t] of bench.caughtUp) caughtUp.set(b, t);
      await stop();
      ({ bench, stop } = await startBench(benchOptions, await mkdtemp(join(stateDir, 'peer-')), row));
    }
    await peerScenario(bench);
  }
  for (const [b, t] of bench.caughtUp) caughtUp.set(b, (caughtUp.get(b) ?? 0) + t);
  row(
    'all',
    'resync ticks fired to catch up events an adapter dropped (its watch closed as unresponsive), by batch',
    caughtUp.size === 0 ? 'none' : [...caughtUp].map(([b, t]) => `${b.replace(/-$/, '')}: ${t}`).join(', '),
  );
  await save(false);
} finally {
  await stop();
  if (keep) console.log(`state kept in ${stateDir}`);
  else await rm(stateDir, { recursive: true, force: true });
}
// 15. The cost of a reconcile, on a stack of its own (bench/cost.ts).
if (!scaleOnly && !alone && knative !== 'real') {
  console.log('15. cost');
  await costScenario(row);
}
table();
await save(true);

/** scenarios runs scenarios 1 to 11 and 13 in their order; 10 last (it adds a thousand SyncResources). */
async function scenarios(b: Bench): Promise<void> {
  await settled(b);
  await directLimit(b, await bulkCreate(b));
  await editLatency(b);
  const total = await noopResync(b);
  await driftResync(b, total);
  await coldStart(b);
  await cachedClients(b);
  await rotation(b);
  await scaling(b);
  console.log('11. health');
  await healthScenario(b);
  console.log('13. an SKR down');
  await downScenario(b);
  // 10. Scale (issue 16): S=1,000 over K=100 here; --scale runs it at 10,000 over 1,000.
  await scaleScenario(b.scaleCtx, 1_000, 100);
}

/**
 * settled waits for the runtime's start to settle. Its sources report every existing Kyma
 * and access Secret as added, and each fans out a resync of its SyncResources; overlapping
 * the bulk, that resynced a varying share of it (7 to 18 per Kyma). And the SKR source's
 * replicas share the Kymas only once each has seen the other's Lease (a renewal, 3 s):
 * until then the first to start posts for every Kyma, and the second takes its share only
 * then, posting again what is not settled by then (before the second waited to be seen,
 * both posted, and SyncResources created meanwhile were posted twice: 68 of 300).
 */
async function settled(b: Bench): Promise<void> {
  await b.rt.broker.idle(60_000);
  await sourcesSettled(b.rt);
}

/** throughputOnly is --throughput: the bulk create, the direct loop beside it, a no-op resync (scenarios 1, 2 and 4). */
async function throughputOnly(b: Bench): Promise<void> {
  await settled(b);
  await directLimit(b, await bulkCreate(b));
  await noopResync(b);
}

/** coldStartOnly is --cold-start: the bulk create (bench-1 is the SyncResource of the first reconcile), then scenario 6. */
async function coldStartOnly(b: Bench): Promise<void> {
  await settled(b);
  await bulkCreate(b);
  await coldStart(b);
}

/** editsOnly is --edits: scenario 3 alone. */
async function editsOnly(b: Bench): Promise<void> {
  await settled(b);
  await editLatency(b);
}

/** scaleOnlyRun is --scale: scenario 10 alone, at --kymas or its default sizes. */
async function scaleOnlyRun(b: Bench): Promise<void> {
  await settled(b);
  const kymas = args.kymas !== undefined ? Number(args.kymas) : undefined;
  if (kymas !== undefined && !(Number.isInteger(kymas) && kymas >= 100))
    throw new Error(`--kymas is a number of at least 100, not ${args.kymas}`);
  await scaleScenario(b.scaleCtx, kymas ?? (quick ? 1_000 : 10_000), kymas ?? (quick ? 100 : 1_000));
}

/** senderScenario is scenario 12: what verifying a delivery's token costs (bench/senders.ts). */
async function senderScenario(b: Bench): Promise<void> {
  console.log('12. sender identity');
  const cost = await verifyCost(b.kcp, b.set.kcp.kubeconfigFile, b.NS);
  row(
    '12 sender identity',
    'verification per delivery, one process: CPU / wall',
    `${cost.cpuUs.toFixed(0)} µs / ${cost.wallUs.toFixed(0)} µs`,
  );
  row('12 sender identity', 'first verification (reads discovery and keys)', `${cost.first.toFixed(0)} ms`);
  if (knative === 'real') {
    const p = await pipelineVerify(b.ports);
    row(
      '12 sender identity',
      oidc
        ? 'in the pipeline: deliveries verified, mean time each, refused'
        : 'in the pipeline: off (--oidc off)',
      oidc ? `${p.count}, ${p.meanUs.toFixed(0)} µs, ${p.refused}` : 'no delivery verified',
    );
  }
}

/** peerScenario is scenario 14: side by side with a real peer (bench/peer.ts). */
async function peerScenario(b: Bench): Promise<void> {
  console.log("14. side by side with Gardener's resource-manager");
  await settled(b);
  const infra = new Set(['etcd', 'KCP kube-apiserver', 'SKRs kube-apiserver', 'kube-controller-managers']);
  await peerComparison({
    set: b.set,
    kcp: b.kcp,
    skrs: b.skrs,
    rt: b.rt,
    stateDir,
    quick,
    nodeName: NODE_NAME,
    n: b.S,
    edits: b.EDITS,
    row,
    settle: b.settle,
    requests: b.requests,
    productCpu: async () =>
      Object.entries(await b.cpuNow())
        .filter(([g]) => !infra.has(g) && !g.startsWith('this process'))
        .reduce((a, [, v]) => a + v, 0),
    productPids: () => b.pids().map((p) => p.pid),
    log: (l) => console.log(`  ${l}`),
  });
}
