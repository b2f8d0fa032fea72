// senders.ts checks who sent a delivery before its handler runs (SYNC_EVENT_AUTH=oidc):
// the token's issuer is the KCP's service-account issuer, read with the function's own
// credentials (lib/policy/senders.ts verifies).
import type { Context } from 'faas-js-runtime';
import type { Logger } from '../lib/pipeline/deps.ts';
import { KubeClient } from '../lib/kube/client.ts';
import { credentialsFromFile, inClusterCredentials } from '../lib/kube/credentials.ts';
import { SenderRefused, SenderVerifier, senderPolicyFromEnv, type Issuer } from '../lib/policy/senders.ts';
import { Metrics } from '../lib/telemetry.ts';
import { HttpError } from './errors.ts';
import { logger } from './step.ts';

/** kcpIssuer reads the KCP's service-account issuer (discovery and keys) with the function's own credentials. */
export function kcpIssuer(
  env: Record<string, string | undefined> = process.env,
): Issuer & { close(): Promise<void> } {
  const creds = env.KUBECONFIG ? credentialsFromFile(env.KUBECONFIG) : inClusterCredentials(env);
  const client = KubeClient.create(creds, { name: 'kcp-issuer', qps: 5, burst: 10 });
  return {
    discovery: () => client.call<{ issuer: string }>('GET', '/.well-known/openid-configuration'),
    keys: () => client.call('GET', '/openid/v1/jwks', { headers: { accept: 'application/jwk-set+json' } }),
    close: () => client.close(),
  };
}

/** SenderCheck checks a delivery's sender before the handler runs (ready: before traffic). */
export interface SenderCheck {
  check(context: Context): Promise<void>;
  ready(): Promise<void>;
  close(): Promise<void>;
}

/**
 * senderCheck is the function's check of who sent a delivery (lib/policy/senders.ts),
 * or undefined when SYNC_EVENT_AUTH=none. A refusal is answered 401/403 and counted by
 * reason; it is logged without the token.
 */
export function senderCheck(
  fn: string,
  env: Record<string, string | undefined> = process.env,
  fallback: Logger = { info() {}, warn() {}, error() {} },
): SenderCheck | undefined {
  const policy = senderPolicyFromEnv(env);
  Metrics.senderIdentity.add(policy ? 1 : 0, { function: fn });
  if (!policy) return undefined;
  const issuer = kcpIssuer(env);
  const verifier = new SenderVerifier(policy, issuer);
  return {
    ready: () => verifier.ready(),
    close: () => issuer.close(),
    async check(context) {
      const started = performance.now();
      const auth = context.headers?.authorization;
      try {
        await verifier.verify(Array.isArray(auth) ? auth[0] : auth);
      } catch (err) {
        if (!(err instanceof SenderRefused))
          throw new HttpError(503, `the KCP's service-account issuer cannot be read: ${String(err)}`, err);
        Metrics.senderRefusals.add(1, { function: fn, reason: err.reason });
        logger(context, fallback).warn(
          {
            step: fn,
            code: err.code,
            reason: err.reason,
            error: err.message,
            ceType: context.headers?.['ce-type'],
          },
          'delivery refused',
        );
        throw new HttpError(err.code, err.message, err);
      } finally {
        Metrics.senderVerifyDuration.record((performance.now() - started) / 1000, { function: fn });
      }
    },
  };
}
