// The attacker's side of sender identity (lib/policy/senders.ts, knative.yaml's
// EventPolicies), on Knative's own eventing with authentication-oidc: a process with no
// token, one with a token of another ServiceAccount of the namespace, and a product
// identity outside its lane post forged events of every type the product consumes, to the
// Broker and straight to every function's address. Each is refused; nothing changes in the
// KCP (status, Events) or the SKR; the functions count each refusal. Then tokens a forger
// could make with the KCP's own signing key but the wrong audience, issuer or expiry are
// refused by a function, and the same token with everything right is accepted (the
// control: the refusals are for the one property each changes).
import { createPrivateKey } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { CloudEvent, HTTP } from 'cloudevents';
import { generateKeyPair, SignJWT } from 'jose';
import { ProxyAgent, request } from 'undici';
import { expect } from 'vitest';
import type { ClusterSet } from '../infra/clusters.ts';
import type { KnativeRuntime } from '../infra/runtime/real.ts';
import { ApiServerRefTypes, EventTypes, PING_TYPE, SOURCE_PREFIX } from '../lib/events/contract.ts';
import type { SyncResource } from '../lib/model.ts';
import { triggerSubject } from '../lib/policy/senders.ts';
import { kubectl, syncResourceYaml } from './e2e-helpers.ts';
import { eventually, uniqueName } from './helpers.ts';

const BROKER_AUDIENCE = 'eventing.knative.dev/broker/kcp-system/kcp-sync';
const audienceOf = (svc: string) => `serving.knative.dev/service/kcp-system/${svc}`;

interface Ctx {
  rt: KnativeRuntime;
  set: ClusterSet;
  kcp: string;
  skr: string;
  ns: string;
  metricsPorts: Record<string, number>;
  services: string[];
}

/** refusals sums sync_sender_refusals_total per function over every replica. */
async function refusals(ctx: Ctx): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const [key, port] of Object.entries(ctx.metricsPorts)) {
    const svc = key.split('/')[0]!;
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    for (const line of text.split('\n'))
      if (line.startsWith('sync_sender_refusals_total{'))
        out[svc] = (out[svc] ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return out;
}

/** forged returns one event of every type the product consumes, naming the SyncResource. */
function forged(ns: string, sr: SyncResource): CloudEvent<unknown>[] {
  const name = sr.metadata.name;
  const uid = sr.metadata.uid!;
  const ref = { apiVersion: 'operator.kyma-project.io/v1alpha1', kind: 'SyncResource', name, namespace: ns };
  const lie = {
    namespace: ns,
    name,
    uid,
    kyma: 'kyma-1',
    result: {
      generation: sr.metadata.generation,
      items: [{ name: 'cm', state: 'Error', reason: 'Forged', message: 'forged by attacker' }],
    },
  };
  const mk = (type: string, source: string, data: unknown) =>
    new CloudEvent({ type, source, subject: `${ns}/${name}`, data });
  return [
    ...ApiServerRefTypes.map((t) => mk(t, 'https://kcp', ref)),
    mk(PING_TYPE, `/apis/v1/namespaces/${ns}/pingsources/sync-resync`, { reason: 'resync' }),
    mk(EventTypes.reconcile, `${SOURCE_PREFIX}/resync`, { namespace: ns, name, trigger: 'resync' }),
    mk(EventTypes.reconcileKyma, `${SOURCE_PREFIX}/resync`, {
      namespace: ns,
      name: 'kyma-1',
      trigger: 'resync',
    }),
    mk(EventTypes.clusterResolved, `${SOURCE_PREFIX}/resolve-cluster`, {
      namespace: ns,
      name,
      uid,
      generation: sr.metadata.generation,
      kyma: 'kyma-1',
      secret: { name: 'kyma-1-kubeconfig', resourceVersion: '1' },
    }),
    mk(EventTypes.kymaResolved, `${SOURCE_PREFIX}/resolve-cluster`, {
      namespace: ns,
      name: 'kyma-1',
      trigger: 'resync',
      secret: { name: 'kyma-1-kubeconfig', resourceVersion: '1' },
    }),
    mk(EventTypes.itemsApplied, `${SOURCE_PREFIX}/apply-items`, lie),
    // The SKR source's: a claim that the SyncResource's object is gone.
    mk(EventTypes.skrChanged, `${SOURCE_PREFIX}/skr-source`, {
      namespace: ns,
      name,
      uid,
      kyma: 'kyma-1',
      changes: [{ apiVersion: 'v1', kind: 'ConfigMap', namespace: ns, name: 'kept', change: 'gone' }],
    }),
    // The SKR source's: a report that the SyncResource's object failed (written without a run).
    mk(EventTypes.skrHealth, `${SOURCE_PREFIX}/skr-source`, {
      namespace: ns,
      name,
      uid,
      kyma: 'kyma-1',
      objects: [
        {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          namespace: ns,
          name: 'kept',
          health: { status: 'Failed', message: 'forged by attacker' },
        },
      ],
    }),
    // The SKR source's: a claim that the SyncResource was edited.
    mk(EventTypes.changed, `${SOURCE_PREFIX}/skr-source`, {
      namespace: ns,
      name,
      uid,
      generation: sr.metadata.generation,
      kyma: 'kyma-1',
      change: true,
    }),
  ];
}

export async function senderAttacks(ctx: Ctx): Promise<void> {
  const { rt, kcp, skr, ns } = ctx;
  const via = new ProxyAgent(rt.net.url);
  const post = async (url: string, event: CloudEvent<unknown>, token?: string) => {
    const msg = HTTP.binary(event);
    const res = await request(url, {
      method: 'POST',
      headers: {
        ...(msg.headers as Record<string, string>),
        ...(token ? { authorization: `Bearer ${token}` } : {}),
      },
      body: msg.body as string,
      dispatcher: via,
    });
    await res.body.dump();
    return res.statusCode;
  };
  const token = async (sa: string, audience: string) =>
    (
      await kubectl(kcp, ['create', 'token', sa, '-n', ns, '--audience', audience, '--duration', '10m'])
    ).trim();
  const getSr = async (name: string) =>
    JSON.parse(await kubectl(kcp, ['get', 'syncresource', name, '-n', ns, '-o', 'json'])) as SyncResource;
  const eventsOf = async (name: string) =>
    (
      JSON.parse(await kubectl(kcp, ['get', 'events.events.k8s.io', '-n', ns, '-o', 'json'])) as {
        items: { regarding?: { name?: string }; metadata: { name: string } }[];
      }
    ).items
      .filter((e) => e.regarding?.name === name)
      .map((e) => e.metadata.name)
      .sort();
  const skrVersion = async (cm: string, target: string) =>
    (
      JSON.parse(await kubectl(skr, ['get', 'configmap', cm, '-n', target, '-o', 'json'])) as {
        metadata: { resourceVersion: string };
      }
    ).metadata.resourceVersion;

  try {
    // A Ready SyncResource, the one the forged events name.
    const name = uniqueName('forged');
    const target = uniqueName('target');
    await kubectl(
      kcp,
      ['apply', '-f', '-'],
      syncResourceYaml(ns, name, 'kyma-1', [
        {
          name: 'ns',
          strategy: 'CreateAndSync',
          resource: `apiVersion: v1\nkind: Namespace\nmetadata: {name: ${target}}\n`,
        },
        {
          name: 'cm',
          strategy: 'CreateAndSync',
          resource: `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kept, namespace: ${target}}\ndata: {a: "1"}\n`,
        },
      ]),
    );
    await eventually(async () => expect((await getSr(name)).status?.state).toBe('Ready'), 60_000);
    // Settled: its first run's follow-ups (labels, the SKR source's) are written, a resync tick changes nothing.
    for (let rv = '', i = 0; i < 6; i++) {
      const now = (await getSr(name)).metadata.resourceVersion!;
      if (now === rv) break;
      rv = now;
      await sleep(10_000);
    }
    const before = {
      sr: await getSr(name),
      events: await eventsOf(name),
      cm: await skrVersion('kept', target),
      refusals: await refusals(ctx),
    };
    const events = forged(ns, before.sr);

    await kubectl(kcp, ['create', 'serviceaccount', 'intruder', '-n', ns]);
    const intruderForBroker = await token('intruder', BROKER_AUDIENCE);
    // A product identity outside its lane: resync's own token may post reconcile requests only.
    const resyncForBroker = await token('sync-resync', BROKER_AUDIENCE);
    const broker = rt.brokerUrl;
    for (const e of events) {
      expect(await post(broker, e), `broker, no token, ${e.type}`).toBe(401);
      expect(await post(broker, e, intruderForBroker), `broker, intruder, ${e.type}`).toBe(403);
      // A token of the right identity for another audience (a function's) does not pass the broker.
      expect(await post(broker, e, await token('sync-resync', audienceOf('sync-resync'))), e.type).toBe(401);
      if (e.type !== EventTypes.reconcile && e.type !== EventTypes.reconcileKyma)
        expect(await post(broker, e, resyncForBroker), `broker, sync-resync, ${e.type}`).toBe(403);
    }
    for (const svc of ctx.services) {
      const url = `http://${svc}.${ns}.svc.cluster.local/`;
      const ownAudience = await token('intruder', audienceOf(svc));
      for (const e of events) {
        expect(await post(url, e), `${svc}, no token, ${e.type}`).toBe(401);
        expect(await post(url, e, intruderForBroker), `${svc}, broker's audience, ${e.type}`).toBe(401);
        expect(await post(url, e, ownAudience), `${svc}, intruder, ${e.type}`).toBe(403);
      }
    }
    // Every refusal counted, by the function that refused it: three tokens per event.
    const after = await refusals(ctx);
    for (const svc of ctx.services)
      expect((after[svc] ?? 0) - (before.refusals[svc] ?? 0), svc).toBe(events.length * 3);

    // A resync tick later nothing has changed: not the status, not its Events, not the SKR.
    await sleep(10_000);
    const now = await getSr(name);
    expect(now.metadata.resourceVersion).toBe(before.sr.metadata.resourceVersion);
    expect(now.status).toEqual(before.sr.status);
    expect(await eventsOf(name)).toEqual(before.events);
    expect(await skrVersion('kept', target)).toBe(before.cm);

    // Tokens made with the KCP's own signing key: only the one right in every claim is accepted.
    const discovery = JSON.parse(
      await kubectl(kcp, ['get', '--raw', '/.well-known/openid-configuration']),
    ) as {
      issuer: string;
    };
    const jwks = JSON.parse(await kubectl(kcp, ['get', '--raw', '/openid/v1/jwks'])) as {
      keys: { kid: string }[];
    };
    // The KCP signs with its service-account key (EC P-256 here: ES256; an RSA key: RS256).
    const key = createPrivateKey(await readFile(ctx.set.kcp.pki.serviceAccount.keyFile));
    const alg = key.asymmetricKeyType === 'ec' ? 'ES256' : 'RS256';
    const stranger = (await generateKeyPair(alg)).privateKey;
    const forge = (
      claims: { iss?: string; aud?: string; exp?: number },
      signer: Parameters<SignJWT['sign']>[0] = key,
    ) =>
      new SignJWT({})
        .setProtectedHeader({ alg, kid: jwks.keys[0]!.kid })
        .setIssuedAt()
        .setIssuer(claims.iss ?? discovery.issuer)
        .setAudience(claims.aud ?? audienceOf('sync-resync'))
        .setSubject(triggerSubject(ns, 'sync-resync'))
        .setExpirationTime(claims.exp ?? Math.floor(Date.now() / 1000) + 300)
        .sign(signer);
    const resync = `http://sync-resync.${ns}.svc.cluster.local/`;
    const tick = () =>
      new CloudEvent({
        type: PING_TYPE,
        source: `/apis/v1/namespaces/${ns}/pingsources/sync-resync`,
        data: { reason: 'resync' },
      });
    expect(
      await post(resync, tick(), await forge({ aud: audienceOf('sync-apply-items') })),
      'another audience',
    ).toBe(401);
    expect(
      await post(resync, tick(), await forge({ exp: Math.floor(Date.now() / 1000) - 60 })),
      'expired',
    ).toBe(401);
    expect(await post(resync, tick(), await forge({ iss: 'https://issuer.example' })), 'another issuer').toBe(
      401,
    );
    expect(await post(resync, tick(), await forge({}, stranger)), 'another key').toBe(401);
    const accepted = await post(resync, tick(), await forge({}));
    expect(accepted, 'right in every claim').toBeGreaterThanOrEqual(200);
    expect(accepted).toBeLessThan(300);
  } finally {
    await kubectl(kcp, ['delete', 'serviceaccount', 'intruder', '-n', ns, '--ignore-not-found']);
    await via.close();
  }
}
