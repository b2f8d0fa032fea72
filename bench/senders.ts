// senders.ts: the cost of sender identity (lib/policy/senders.ts). Scenario 12 of run.ts.
//   - Per delivery, in isolation: the verifier of a function, reading the local KCP's
//     real issuer (discovery and JWKS, with a token of its own), verifies real
//     service-account tokens (TokenRequest; ES256 with the local KCP's EC key) as a delivery's Authorization header:
//     CPU and wall time per verification, in one process.
//   - In the pipeline (knative: real, where every delivery carries a token): the
//     functions' own histogram, sync_sender_verify_duration_{sum,count}, over the whole run.
// Figures only.
import { setTimeout as sleep } from 'node:timers/promises';
import { kcpIssuer } from '../functions/senders.ts';
import type { Cluster } from '../lib/kube/objects.ts';
import { SenderVerifier } from '../lib/policy/senders.ts';
import { scrape } from './scale.ts';

const N = 2_000;

/** verifyCost measures a verifier's CPU and wall time per verification against the KCP's issuer. */
export async function verifyCost(
  kcp: Cluster,
  kubeconfig: string,
  namespace: string,
): Promise<{ cpuUs: number; wallUs: number; first: number }> {
  await kcp.client
    .call('POST', '/api/v1/namespaces', {
      body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } },
    })
    .catch(() => undefined);
  await kcp.client
    .call('POST', `/api/v1/namespaces/${namespace}/serviceaccounts`, {
      body: { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'bench-sender' } },
    })
    .catch(() => undefined);
  const audience = 'serving.knative.dev/service/bench/receiver';
  const tokens = await Promise.all(
    Array.from(
      { length: 20 },
      async () =>
        (
          await kcp.client.call<{ status: { token: string } }>(
            'POST',
            `/api/v1/namespaces/${namespace}/serviceaccounts/bench-sender/token`,
            {
              body: {
                apiVersion: 'authentication.k8s.io/v1',
                kind: 'TokenRequest',
                spec: { audiences: [audience] },
              },
            },
          )
        ).status.token,
    ),
  );
  const issuer = kcpIssuer({ KUBECONFIG: kubeconfig });
  const verifier = new SenderVerifier(
    { audience, subjects: new Set([`system:serviceaccount:${namespace}:bench-sender`]) },
    issuer,
  );
  try {
    const t0 = performance.now();
    await verifier.verify(`Bearer ${tokens[0]}`); // reads discovery and keys
    const first = performance.now() - t0;
    await sleep(10);
    const cpu = process.cpuUsage();
    const start = performance.now();
    for (let i = 0; i < N; i++) await verifier.verify(`Bearer ${tokens[i % tokens.length]}`);
    const wall = performance.now() - start;
    const used = process.cpuUsage(cpu);
    return { cpuUs: (used.user + used.system) / N, wallUs: (wall * 1000) / N, first };
  } finally {
    await issuer.close();
  }
}

/** pipelineVerify sums the functions' verification histogram: deliveries verified and the mean time per one. */
export async function pipelineVerify(
  metricsPorts: Record<string, number>,
): Promise<{ count: number; meanUs: number; refused: number }> {
  let sum = 0;
  let count = 0;
  let refused = 0;
  for (const [svc, port] of Object.entries(metricsPorts)) {
    const text = await scrape(svc, port);
    for (const m of text.matchAll(/^sync_sender_verify_duration_sum(?:\{[^}]*\})? ([\d.e+-]+)/gm))
      sum += Number(m[1]);
    for (const m of text.matchAll(/^sync_sender_verify_duration_count(?:\{[^}]*\})? (\d+)/gm))
      count += Number(m[1]);
    for (const m of text.matchAll(/^sync_sender_refusals_total(?:\{[^}]*\})? (\d+)/gm))
      refused += Number(m[1]);
  }
  return { count, meanUs: count ? (sum / count) * 1e6 : 0, refused };
}
