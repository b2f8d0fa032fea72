// deps.ts holds the process's dependencies: built from the environment on first use
// (lib/pipeline/setup.ts), or given by a test.
import type { Deps } from '../lib/pipeline/deps.ts';
import { depsFromEnv } from '../lib/pipeline/setup.ts';

let deps: Promise<Deps> | undefined;

/** setDeps injects dependencies (tests); otherwise they come from the environment on first use. */
export function setDeps(d: Deps | Promise<Deps>): void {
  deps = Promise.resolve(d);
}

/** getDeps returns the process's dependencies. */
export function getDeps(): Promise<Deps> {
  deps ??= depsFromEnv();
  return deps;
}
