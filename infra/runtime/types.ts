// types.ts: what both local runtimes (the stand-in, index.ts, and Knative's own parts,
// real.ts) are started with and give back.
import type { CloudEvent } from 'cloudevents';
import type { Proc } from '../processes.ts';
import type { ReceiveAdapter } from './adapter.ts';
import type { ApiProxy } from './apiproxy.ts';
import type { BrokerStats, Chaos, Observed } from './broker.ts';
import type { Delivery, Doc } from './knative.ts';
import type { Pod } from './pods.ts';

/** RuntimeOptions configure startRuntime. */
export interface RuntimeOptions {
  /** kubeconfig is the path of the KCP kubeconfig the functions and sources use. */
  kubeconfig: string;
  /** stateDir receives logs/ and dead-letters.log. */
  stateDir: string;
  knativeYaml?: string;
  /** pingIntervalMs overrides the resync PingSource's schedule (e.g. seconds in tests). */
  pingIntervalMs?: number;
  /** adapterEnv is added to the SKR source's environment. */
  adapterEnv?: Record<string, string>;
  /** skrSourceReplicas overrides the SKR source Deployment's replicas. */
  skrSourceReplicas?: number;
  /** env is added to every function's environment (e.g. SYNC_* settings). */
  env?: Record<string, string>;
  /** envFor adds per-process environment (e.g. a metrics port of its own), by Service and replica. */
  envFor?: (service: string, replica: number) => Record<string, string> | Promise<Record<string, string>>;
  /** namespace overrides the control-plane namespace of knative.yaml (sources and functions). */
  namespace?: string;
  chaos?: Chaos;
  /** delivery overrides the Broker's delivery settings (tests shorten the backoff). */
  delivery?: Delivery;
  /** rbacEdit changes knative.yaml's ServiceAccounts, Roles and RoleBindings before they are applied (tests take a rule away). */
  rbacEdit?: (docs: Doc[]) => Doc[];
  /**
   * sources: "real" (default) runs Knative's own ApiServerSource receive adapter, one
   * process per ApiServerSource (adapter.ts); "emulated" the in-process stand-in (sources.ts).
   */
  sources?: 'real' | 'emulated';
  /** log receives progress lines (a first-run build of the adapter). */
  log?: (line: string) => void;
  /** brokerMode: "channel" (default), the semantics of Knative's default channel-based Broker; "async" answers posts at once (broker.ts). */
  brokerMode?: 'channel' | 'async';
  /** replicas is the number of processes per function Service (default 2: Knative runs several; per-process state exists once per replica). */
  replicas?: number;
  /**
   * oidc (knative: real only; default on) runs Knative with sender identity
   * (authentication-oidc) and knative.yaml's EventPolicies; off, the functions run with
   * SYNC_EVENT_AUTH=none, as on a cluster without the feature.
   */
  oidc?: boolean;
  /**
   * knative: "emulated" (default, $KCP_SYNC_KNATIVE) runs the stand-ins above; "real" runs
   * Knative Eventing's own controllers and data plane with Serving's queue-proxy (real.ts).
   */
  knative?: 'emulated' | 'real';
}

/** DEFAULT_REPLICAS is how many processes each function runs locally unless told otherwise ($KCP_SYNC_REPLICAS). */
export const DEFAULT_REPLICAS = Number(process.env.KCP_SYNC_REPLICAS ?? 2);

/** FunctionProc is one running replica of a function Service. */
export interface FunctionProc {
  service: string;
  /** replica numbers a Service's processes from 0. */
  replica: number;
  url: string;
  port: number;
  proc: Proc;
  /** pod is the Pod it plays (its own address: pods.ts). */
  pod?: Pod;
}

/** AdapterProc is one running replica of the product's own adapter (the SKR source). */
export interface AdapterProc {
  name: string;
  /** pod is the replica's name (its POD_NAME, its Lease's holder). */
  pod: string;
  replica: number;
  url: string;
  port: number;
  proc: Proc;
}

/**
 * EventBus is what tests and the benchmark see of the Broker: the stand-in (broker.ts) or,
 * on Knative's own data plane, what passed through the cluster network (real.ts).
 */
export interface EventBus {
  url: string;
  readonly stats: BrokerStats;
  readonly byObject: Map<string, { attempts: number; failures: number }>;
  /** failedBy names, per object, each non-2xx answer: the subscriber, the event type and the code. */
  readonly failedBy: Map<string, string[]>;
  readonly observed: Observed[];
  observe: boolean;
  readonly byReplica: Map<string, number>;
  readonly pending: number;
  idle(timeoutMs?: number, quietMs?: number): Promise<void>;
  publish(event: CloudEvent<unknown>): Promise<void>;
}

/** Ping is a PingSource's schedule: fire sends one tick now; stop holds the schedule until start. */
export interface Ping {
  fire(): void;
  start(): void;
  stop(): void;
}

/** Runtime is the running local event runtime. */
export interface Runtime {
  broker: EventBus;
  functions: FunctionProc[];
  ping: Ping[];
  /** restartFunction kills one replica of a function (SIGKILL; default replica 0) and starts it again on the same port. */
  restartFunction(service: string, replica?: number): Promise<void>;
  /** stopSources kills the ApiServerSource adapters (SIGKILL); startSources starts them again (no events for what happened meanwhile). */
  stopSources(): Promise<void>;
  startSources(): Promise<void>;
  /** adapters are the running ApiServerSource adapter processes (one that exits is restarted, as by the kubelet). */
  adapters: ReceiveAdapter[];
  /** skrSources are the SKR source's replicas (knative.yaml's Deployment sync-skr-source). */
  skrSources: AdapterProc[];
  /** restartSkrSource kills a replica (SIGKILL, or SIGTERM when graceful) and starts it again. */
  restartSkrSource(replica?: number, graceful?: boolean): Promise<AdapterProc>;
  stopSkrSource(replica?: number, graceful?: boolean): Promise<void>;
  startSkrSource(replica?: number): Promise<AdapterProc>;
  /** processes lists further processes by group, for CPU figures (Knative's own parts, queue-proxies). */
  processes?: () => { group: string; pid: number }[];
  /** proxy carries the real adapters' API traffic (breakWatches cuts their watches). */
  proxy?: ApiProxy;
  stop(): Promise<void>;
}
