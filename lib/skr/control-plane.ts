// control-plane.ts is the SKR source's view of the KCP: it lists and watches the
// SyncPolicies, the onboarded team namespaces, the SyncResources of every namespace the
// product acts in (keeping a view of each, view.ts) and the access Secrets, and tells the
// source what changed (ControlPlaneEvents).
import type { Config } from '../config.ts';
import type { KubeClient } from '../kube/client.ts';
import { informer } from '../kube/informer.ts';
import type { KubeObject } from '../kube/objects.ts';
import { KYMA_NAME_LABEL, SYNC_SOURCE_LABEL, TEAM_NAMESPACE_LABEL, type SyncResource } from '../model.ts';
import type { Logger } from '../pipeline/deps.ts';
import { METADATA_ONLY } from '../cluster/resolve.ts';
import { isControlPlane, kymaHome, SYNC_POLICY_PATH, type SyncPolicy } from '../policy/tenancy.ts';
import { viewOf, type SrView } from './view.ts';

/** ControlPlaneEvents are what the source is told: a SyncResource's view put or dropped, an access Secret's version. */
export interface ControlPlaneEvents {
  put(view: SrView, old: SrView | undefined): void;
  drop(old: SrView): void;
  secret(namespace: string, secret: KubeObject, deleted: boolean): void;
}

/** ControlPlaneOptions are the part of the source's options the KCP side uses. */
export interface ControlPlaneOptions {
  kcp: KubeClient;
  config: Config;
  log: Logger;
  syncResources?: { put(sr: SyncResource): void; drop(key: string): void; rerun(namespace: string): void };
}

/** ControlPlaneWatch keeps the views of the SyncResources of every namespace the product acts in. */
export class ControlPlaneWatch {
  /** srs are the views of the SyncResources by "<namespace>/<name>". */
  readonly srs = new Map<string, SrView>();
  private readonly opts: ControlPlaneOptions;
  private readonly on: ControlPlaneEvents;
  private readonly signal: AbortSignal;
  /** policies are the SyncPolicies by name; onboarded the team namespaces labelled so; namespaces the SyncResource watches, by namespace. */
  private readonly policies = new Map<string, SyncPolicy>();
  private readonly onboarded = new Set<string>();
  private readonly namespaces = new Map<string, { abort: AbortController; listed: Promise<void> }>();

  constructor(opts: ControlPlaneOptions, on: ControlPlaneEvents, signal: AbortSignal) {
    this.opts = opts;
    this.on = on;
    this.signal = signal;
  }

  /**
   * start lists and watches the SyncPolicies, the SyncResources of the control-plane
   * namespaces and of every namespace a policy names, and the access Secrets.
   */
  async start(): Promise<void> {
    await this.watchPolicies();
    await this.watchTeamNamespaces();
    await Promise.all(
      [...this.namespaces].filter(([ns]) => isControlPlane(ns, this.opts.config)).map(([, n]) => n.listed),
    );
    for (const ns of this.opts.config.controlPlaneNamespaces) await this.watchAccessSecrets(ns);
  }

  /** watchPolicies keeps the SyncPolicies: a change re-runs the SyncResources of what the policy governs now and governed. */
  private async watchPolicies(): Promise<void> {
    await informer<SyncPolicy>(
      this.opts.kcp,
      SYNC_POLICY_PATH,
      {
        list: (items, last) => {
          for (const p of items) this.policies.set(p.metadata.name, p);
          if (last) this.syncNamespaces();
        },
        event: (type, p) => {
          const before = this.policies.get(p.metadata.name);
          if (type === 'DELETED') this.policies.delete(p.metadata.name);
          else this.policies.set(p.metadata.name, p);
          // What the policy governs now, and what it governed: each of their SyncResources runs again.
          const touched = new Set([
            ...(before?.spec.namespaces ?? []),
            ...(type === 'DELETED' ? [] : p.spec.namespaces),
          ]);
          for (const ns of touched) this.opts.syncResources?.rerun(ns);
          this.syncNamespaces();
        },
        error: (err) => this.opts.log.warn({ error: String(err) }, 'SyncPolicy watch failed'),
      },
      this.signal,
      { retryFirstList: true },
    );
  }

  /** watchTeamNamespaces keeps the team namespaces the operator onboarded (labelled): their SyncResources are told when no policy governs them. */
  private async watchTeamNamespaces(): Promise<void> {
    await informer<KubeObject>(
      this.opts.kcp,
      '/api/v1/namespaces',
      {
        list: (items, last) => {
          this.onboarded.clear();
          for (const n of items) this.onboarded.add(n.metadata.name);
          if (last) this.syncNamespaces();
        },
        event: (type, n) => {
          if (type === 'DELETED') this.onboarded.delete(n.metadata.name);
          else this.onboarded.add(n.metadata.name);
          this.syncNamespaces();
        },
        error: (err) => this.opts.log.warn({ error: String(err) }, 'team namespace watch failed'),
      },
      this.signal,
      {
        retryFirstList: true,
        headers: METADATA_ONLY,
        query: { labelSelector: `${TEAM_NAMESPACE_LABEL}=true` },
      },
    );
  }

  /** watchAccessSecrets tells the source every access Secret's version (metadata only; not the sync sources). */
  private async watchAccessSecrets(ns: string): Promise<void> {
    await informer<KubeObject>(
      this.opts.kcp,
      `/api/v1/namespaces/${ns}/secrets`,
      {
        list: (items) => {
          for (const s of items) this.on.secret(ns, s, false);
        },
        event: (type, s) => this.on.secret(ns, s, type === 'DELETED'),
      },
      this.signal,
      {
        retryFirstList: true,
        headers: METADATA_ONLY,
        query: { labelSelector: `${KYMA_NAME_LABEL},!${SYNC_SOURCE_LABEL}` },
      },
    );
  }

  /**
   * syncNamespaces watches the SyncResources of the control-plane namespaces, of every team
   * namespace an operator onboarded (labelled) or a policy names (governed by it, or
   * refused: either way its SyncResources are told so), and of every namespace where one
   * still carries our finalizer (its policy removed, its deletion still removes what it
   * created); it lets go of the others.
   */
  private syncNamespaces(): void {
    const wanted = new Set([
      ...this.opts.config.controlPlaneNamespaces,
      ...this.onboarded,
      ...[...this.policies.values()].flatMap((p) =>
        Array.isArray(p.spec?.namespaces) ? p.spec.namespaces : [],
      ),
      ...[...this.srs.values()].filter((v) => v.claimed).map((v) => v.namespace),
    ]);
    for (const [ns, n] of this.namespaces) {
      if (wanted.has(ns)) continue;
      n.abort.abort();
      this.namespaces.delete(ns);
      for (const key of [...this.srs.keys()]) if (key.startsWith(`${ns}/`)) this.dropSr(key);
    }
    for (const ns of wanted) if (!this.namespaces.has(ns)) this.watchSyncResources(ns);
  }

  /** watchSyncResources lists (in pages: only the views are kept) and watches the SyncResources of ns. */
  private watchSyncResources(ns: string): void {
    const abort = new AbortController();
    this.signal.addEventListener('abort', () => abort.abort(), { once: true });
    const seen = new Set<string>();
    const listed = informer<SyncResource>(
      this.opts.kcp,
      `/apis/operator.kyma-project.io/v1alpha1/namespaces/${ns}/syncresources`,
      {
        list: (items, last) => {
          for (const s of items) {
            seen.add(`${ns}/${s.metadata.name}`);
            this.putSr(s);
          }
          if (!last) return;
          for (const key of [...this.srs.keys()])
            if (key.startsWith(`${ns}/`) && !seen.has(key)) this.dropSr(key);
          seen.clear();
        },
        event: (type, s) => (type === 'DELETED' ? this.dropSr(`${ns}/${s.metadata.name}`) : this.putSr(s)),
        error: (err) =>
          this.opts.log.warn({ namespace: ns, error: String(err) }, 'SyncResource watch failed'),
      },
      abort.signal,
      // A team namespace the operator has not bound the product in yet is retried (start waits for none).
      { retryFirstList: true, pageSize: 250 },
    ).catch((err: unknown) =>
      this.opts.log.warn({ namespace: ns, error: String(err) }, 'SyncResources not listed'),
    );
    this.namespaces.set(ns, { abort, listed });
  }

  private putSr(sr: SyncResource): void {
    this.opts.syncResources?.put(sr);
    const view = viewOf(
      sr,
      this.opts.config.fieldManager,
      kymaHome(sr.metadata.namespace ?? '', this.opts.config),
    );
    const old = this.srs.get(view.key);
    this.srs.set(view.key, view);
    this.on.put(view, old);
  }

  private dropSr(key: string): void {
    this.opts.syncResources?.drop(key);
    const old = this.srs.get(key);
    if (!old) return;
    this.srs.delete(key);
    this.on.drop(old);
    // Perhaps the last of ours in a team namespace watched only for it: let go of it then.
    if (!isControlPlane(old.namespace, this.opts.config)) queueMicrotask(() => this.syncNamespaces());
  }
}
