// setup.ts builds the pipeline's dependencies once per process from the environment:
// configuration (SYNC_*), the KCP client (in-cluster, or KUBECONFIG locally) and the
// broker sink (K_SINK, injected by the SinkBinding).
import { hostname } from 'node:os';
import { emitterFor, type CloudEvent, type Message, type TransportFunction } from 'cloudevents';
import { EnvHttpProxyAgent, request } from 'undici';
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
 */
export function sinkTransport(
  url: string,
  env: Record<string, string | undefined> = process.env,
): TransportFunction {
  const proxied = env.HTTP_PROXY ?? env.http_proxy;
  const dispatcher = proxied
    ? new EnvHttpProxyAgent({ httpProxy: proxied, noProxy: env.NO_PROXY ?? env.no_proxy ?? '' })
    : undefined;
  const token = env.SYNC_SINK_TOKEN_FILE ? fileToken(env.SYNC_SINK_TOKEN_FILE) : undefined;
  return async (message: Message) => {
    const res = await request(url, {
      method: 'POST',
      headers: {
        ...(message.headers as Record<string, string>),
        ...(token ? { authorization: `Bearer ${token()}` } : {}),
      },
      body: message.body as string,
      ...(dispatcher ? { dispatcher } : {}),
    });
    await res.body.dump();
    if (res.statusCode < 200 || res.statusCode >= 300)
      throw new Error(`sink ${url} answered ${res.statusCode}`);
    return res.statusCode;
  };
}

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
