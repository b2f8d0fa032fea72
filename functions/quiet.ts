// quiet.ts: faas-js-runtime builds overload-protection's probes when it loads, whether they
// are used or not (serve.ts answers the probes itself), and with them a loopbench sampler
// that wakes the process every 5 ms for its whole life: most of an idle function's CPU, for
// every process Knative keeps (BENCHMARKS.md, CPU at rest). Its default metrics
// (prom-client) keep a second sampler, every 10 ms: not collected either.
import module from 'node:module';

/**
 * stopOverloadSampler hands overload-protection a loopbench whose sampler is stopped as it
 * is made. It must run before faas-js-runtime is imported (overload-protection takes
 * loopbench when it loads).
 */
export function stopOverloadSampler(): void {
  const fromRuntime = module.createRequire(import.meta.resolve('faas-js-runtime'));
  const fromProtection = module.createRequire(fromRuntime.resolve('overload-protection'));
  const path = fromProtection.resolve('loopbench');
  const loopbench = fromProtection('loopbench') as (opts: unknown) => { stop(): void };
  fromProtection.cache[path]!.exports = (opts: unknown) => {
    const sampler = loopbench(opts);
    sampler.stop();
    return sampler;
  };
}

/**
 * skipDefaultMetrics keeps faas-js-runtime from collecting prom-client's default process
 * metrics on its /metrics (its faas_* counters stay). Among them is an event-loop delay
 * histogram that samples every 10 ms for the life of the process: as much CPU in an idle
 * function as everything else it does at rest, for figures
 * (nodejs_*, process_*) no dashboard of ours reads; a coarser sampling would report the
 * sampling interval as the loop's delay. CPU and memory of a function are its container's
 * (the kubelet's cAdvisor metrics). It must run before faas-js-runtime is imported (its
 * metrics module takes collectDefaultMetrics when it loads).
 */
export function skipDefaultMetrics(): void {
  const fromRuntime = module.createRequire(import.meta.resolve('faas-js-runtime'));
  const prom = fromRuntime('prom-client') as { collectDefaultMetrics: (config?: unknown) => void };
  prom.collectDefaultMetrics = () => {};
}
