// setup.ts builds the pipeline's dependencies once per process from the environment:
// configuration (SYNC_*), the KCP client (in-cluster, or KUBECONFIG locally) and the
// broker sink (K_SINK, injected by the SinkBinding).
import { hostname } from 'node:os';
import { emitterFor, type CloudEvent, type Message, type TransportFunction } from 'cloudevents';
import { ClientCache } from '../cluster/cache.ts';
import { Lookups } from '../cluster/resolve.ts';
import { parseConfig, type Config } from '../config.ts';
import { KcpStore } from '../kcp.ts';
import { KubeClient, type RequestInfo } from '../kube/client.ts';
import { credentialsFromFile, fileToken, inClusterCredentials } from '../kube/credentials.ts';
import { RestMapper } from '../kube/discovery.ts';
import { Recorder } from '../kube/recorder.ts';
import { yieldToUrgent } from '../concurrency.ts';
import { recordRequest } from '../telemetry.ts';
import type { Deps, Logger } from './deps.ts';
import { ProcessState } from './process.ts';

/**
 * sinkTransport posts a CloudEvent message to url and fails on a non-2xx answer (the SDK's
 * own transport ignores the status). HTTP_PROXY and NO_PROXY are honoured when set, as
 * other HTTP clients in a cluster do (the local runtime's cluster network is one).
 * SYNC_SINK_TOKEN_FILE names the function's own ServiceAccount token for the broker's
 * audience (a projected volume the kubelet renews): it goes with every post as the
 * sender's identity, which the Broker's EventPolicies check.
 *
 * Node's own HTTP client, not undici's: undici parses HTTP/1.1 with llhttp compiled to
 * WebAssembly, whose instance and code a process keeps once it has posted (resolve-cluster
 * held 2 to 3 MiB more at rest than the functions that only reply; `npm run bench --
 * --cost`). Node's parser is the same llhttp, built into the binary. undici stays for the
 * API servers (HTTP/2).
 */
export function sinkTransport(
  url: string,
  env: Record<string, string | undefined> = process.env,
): TransportFunction {
  const target = new URL(url);
  const secure = target.protocol === 'https:';
  const proxyEnv = {
    HTTP_PROXY: env.HTTP_PROXY ?? env.http_proxy,
    NO_PROXY: env.NO_PROXY ?? env.no_proxy,
  };
  // The modules as require gives them: an ESM import of node:http reads all its exports,
  // among them the lazy WebSocket ones, which load Node's own copy of undici (1.5 MiB more
  // in every process). TLS only for a sink that asks for it.
  const client = process.getBuiltinModule(secure ? 'node:https' : 'node:http');
  const agent = new client.Agent({ keepAlive: true, proxyEnv });
  const token = env.SYNC_SINK_TOKEN_FILE ? fileToken(env.SYNC_SINK_TOKEN_FILE) : undefined;
  return (message: Message) =>
    new Promise<number>((resolve, reject) => {
      const req = client.request(
        target,
        {
          method: 'POST',
          agent,
          timeout: SINK_TIMEOUT_MS,
          headers: {
            ...(message.headers as Record<string, string>),
            ...(token ? { authorization: `Bearer ${token()}` } : {}),
          },
        },
        (res) => {
          res.resume();
          res.on('error', reject);
          res.on('end', () => {
            const code = res.statusCode ?? 0;
            if (code < 200 || code >= 300) reject(new Error(`sink ${url} answered ${code}`));
            else resolve(code);
          });
        },
      );
      req.on('timeout', () => req.destroy(new Error(`sink ${url} did not answer in ${SINK_TIMEOUT_MS} ms`)));
      req.on('error', reject);
      req.end(message.body as string);
    });
}

/** SINK_TIMEOUT_MS bounds a post: a channel-based Broker answers once the pipeline behind the event has run. */
const SINK_TIMEOUT_MS = 300_000;

/** EnvDeps options let callers observe API requests (metrics) and replace the logger. */
export interface SetupOptions {
  env?: Record<string, string | undefined>;
  log?: Logger;
  onRequest?: (info: RequestInfo) => void;
}

/** depsFromEnv builds Deps from the process environment. */
export async function depsFromEnv(opts: SetupOptions = {}): Promise<Deps> {
  const env = opts.env ?? process.env;
  const onRequest = opts.onRequest ?? recordRequest;
  const config: Config = parseConfig(env);
  const creds = env.KUBECONFIG ? credentialsFromFile(env.KUBECONFIG) : inClusterCredentials(env);
  const client = KubeClient.create(creds, {
    name: 'kcp',
    qps: config.kcpQps,
    burst: config.kcpBurst,
    onRequest,
    beforeRequest: yieldToUrgent,
  });
  const kcp = { client, mapper: new RestMapper(client) };
  const sink = env.K_SINK;
  const emit = sink ? emitterFor(sinkTransport(sink, env)) : undefined;
  return {
    config,
    kcp,
    store: new KcpStore(kcp, config.fieldManager),
    cache: new ClientCache(config, { onRequest, beforeRequest: yieldToUrgent }),
    lookups: new Lookups(kcp),
    recorder: new Recorder(kcp, env.K_REVISION ?? env.HOSTNAME ?? hostname()),
    send: async (event: CloudEvent<unknown>) => {
      if (!emit) throw new Error('K_SINK is not set: this function cannot post events');
      await emit(event);
    },
    log: opts.log ?? { info() {}, warn() {}, error() {} },
    process: new ProcessState(config),
  };
}
