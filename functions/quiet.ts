// quiet.ts: faas-js-runtime builds overload-protection's probes when it loads, whether they
// are used or not (serve.ts answers the probes itself), and with them a loopbench sampler
// that wakes the process every 5 ms for its whole life: an idle function took 437 ms of CPU
// in 20 s with it and 35 ms without, about 2 % of a core for every process Knative keeps.
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
