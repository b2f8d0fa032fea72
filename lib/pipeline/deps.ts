// deps.ts: what every step needs, built once per process from configuration.
import type { CloudEvent } from 'cloudevents';
import type { ClientCache } from '../cluster/cache.ts';
import type { Lookups } from '../cluster/resolve.ts';
import type { Config } from '../config.ts';
import type { KcpStore } from '../kcp.ts';
import type { Cluster } from '../kube/objects.ts';
import type { Recorder } from '../kube/recorder.ts';
import type { ProcessState } from './process.ts';

/** Logger is the structured logger of the handler context: a constant message plus fields. */
export interface Logger {
  info(fields: Record<string, unknown>, msg: string): void;
  warn(fields: Record<string, unknown>, msg: string): void;
  error(fields: Record<string, unknown>, msg: string): void;
}

/** Deps are the collaborators of the pipeline steps. */
export interface Deps {
  config: Config;
  kcp: Cluster;
  store: KcpStore;
  cache: ClientCache;
  /** lookups memoizes Kyma and access-Secret reads for a moment. */
  lookups: Lookups;
  recorder: Recorder;
  /** send posts an event to the broker (K_SINK). */
  send: (event: CloudEvent<unknown>) => Promise<void>;
  log: Logger;
  /** process is what this process keeps between deliveries (process.ts). */
  process: ProcessState;
}
