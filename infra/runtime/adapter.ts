// adapter.ts runs Knative Eventing's real ApiServerSource receive adapter
// (knative.dev/eventing cmd/apiserver_receive_adapter, built by infra/binaries.ts) for one
// ApiServerSource of knative.yaml, as a process with the env its Deployment would get
// from the eventing controller (pkg/reconciler/apiserversource/resources/
// receive_adapter.go: K_SINK, K_SOURCE_CONFIG, SYSTEM_NAMESPACE, NAMESPACE, NAME,
// METRICS_DOMAIN) and its ServiceAccount's token. Its API traffic passes the runtime's
// ApiProxy, which tells when its watches are open.
import { freePort } from '../net.ts';
import { killProcess, startProcess, type Proc } from '../processes.ts';
import type { ApiProxy } from './apiproxy.ts';
import type { ApiServerResource } from './knative.ts';

/** guessResource is meta.UnsafeGuessKindToResource, as the controller maps a kind (lowercase, plural). */
export function guessResource(kind: string): string {
  const k = kind.toLowerCase();
  if (k.endsWith('s')) return `${k}es`;
  if (k.endsWith('y')) return `${k.slice(0, -1)}ies`;
  return `${k}s`;
}

/** sourceConfig is K_SOURCE_CONFIG for one ApiServerSource in namespace (apiserver.Config as JSON). */
export function sourceConfig(namespace: string, resources: ApiServerResource[], mode = 'Reference'): string {
  return JSON.stringify({
    namespaces: [namespace],
    allNamespaces: false,
    mode,
    resources: resources.map((r) => {
      const [group, version] = r.apiVersion.includes('/') ? r.apiVersion.split('/') : ['', r.apiVersion];
      return {
        gvr: { Group: group, Version: version, Resource: guessResource(r.kind) },
        ...(r.labelSelector ? { selector: r.labelSelector } : {}),
      };
    }),
  });
}

/** watchPath is the collection path the adapter watches for a resource in namespace. */
export function watchPath(namespace: string, r: ApiServerResource): string {
  const base = r.apiVersion.includes('/') ? `/apis/${r.apiVersion}` : `/api/${r.apiVersion}`;
  return `${base}/namespaces/${namespace}/${guessResource(r.kind)}`;
}

/** ReceiveAdapter is one running adapter process. */
export interface ReceiveAdapter {
  name: string;
  proc: Proc;
}

/** startAdapter starts the adapter of source and waits until it watches every resource (through proxy). */
export async function startAdapter(opts: {
  binary: string;
  name: string;
  namespace: string;
  resources: ApiServerResource[];
  mode?: string;
  sink: string;
  kubeconfig: string;
  proxy: ApiProxy;
  logDir: string;
}): Promise<ReceiveAdapter> {
  const from = opts.proxy.watched.length;
  const proc = startProcess('adapter', opts.name, opts.binary, [], {
    logDir: opts.logDir,
    env: {
      PATH: process.env.PATH ?? '',
      K_SINK: opts.sink,
      K_SOURCE_CONFIG: sourceConfig(opts.namespace, opts.resources, opts.mode),
      SYSTEM_NAMESPACE: 'knative-eventing',
      NAMESPACE: opts.namespace,
      NAME: opts.name,
      METRICS_DOMAIN: 'knative.dev/eventing',
      KUBECONFIG: opts.kubeconfig,
      // Each Pod has its own network: here the profiling port must be free (the probe
      // server's fixed :8080 may be taken; the adapter runs on without it).
      PROFILING_PORT: String(await freePort()),
    },
  });
  try {
    await Promise.race([
      opts.proxy.waitForWatches(
        opts.resources.map((r) => watchPath(opts.namespace, r)),
        from,
      ),
      proc.exited.then((code) => {
        throw new Error(`ApiServerSource adapter ${opts.name} exited with ${code}; see ${proc.logFile}`);
      }),
    ]);
  } catch (err) {
    await killProcess(proc);
    throw err;
  }
  return { name: opts.name, proc };
}
