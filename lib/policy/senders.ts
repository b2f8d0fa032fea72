// senders.ts: who may hand a function an event. With Knative's sender identity
// (authentication-oidc), the broker's filter attaches to every delivery an OIDC token of
// the Trigger's own ServiceAccount, for the audience the Trigger names for its subscriber;
// the KCP's service-account issuer signed it. A function accepts a delivery only when
// that token verifies (signature by the issuer's published keys, issuer, audience,
// expiry) and its subject is the identity of one of the Triggers the function serves.
// Anything else that reaches the function's address (a process in the cluster, a
// compromised workload with a token of its own) is answered 401 or 403 before any work.
//
// Keys come from the API server's JWKS endpoint (/openid/v1/jwks), read with the
// function's own credentials and kept; an unknown key id reads them again (key rotation),
// at most once per REFRESH_MS. JWKS over TokenReview: a delivery costs a signature check
// (tens of microseconds), not an API round trip, and verification keeps working while the
// API server is slow; the price is that a token of a deleted ServiceAccount stays valid
// until it expires (an hour at most for Knative's tokens), as it does for Knative's own
// broker ingress, which verifies the same way.
import { createHash } from 'node:crypto';
// jose's entry points for what is used, not its index (which loads JWE, signing and more: 46 modules against 12).
import { decodeProtectedHeader } from 'jose/decode/protected_header';
import * as errors from 'jose/errors';
import { createLocalJWKSet } from 'jose/jwks/local';
import { jwtVerify } from 'jose/jwt/verify';
import type { JSONWebKeySet } from 'jose';

/** SenderPolicy says which tokens a function accepts. */
export interface SenderPolicy {
  /** audience is what the function's Triggers name as their subscriber's audience. */
  audience: string;
  /** subjects are the token subjects accepted: the OIDC identities of those Triggers. */
  subjects: ReadonlySet<string>;
}

/** SenderRefused is a delivery refused: 401 (no or no valid token) or 403 (a valid token of another sender). */
export class SenderRefused extends Error {
  readonly code: 401 | 403;
  /** reason is a closed set (the metric's attribute): missing, invalid, expired, audience, issuer, subject. */
  readonly reason: 'missing' | 'invalid' | 'expired' | 'audience' | 'issuer' | 'subject';
  constructor(code: 401 | 403, reason: SenderRefused['reason'], message: string) {
    super(message);
    this.name = 'SenderRefused';
    this.code = code;
    this.reason = reason;
  }
}

/**
 * oidcServiceAccountName is the name of the ServiceAccount Knative makes for a resource's
 * OIDC identity (eventing pkg/auth GetOIDCServiceAccountNameForResource): kmeta.ChildName
 * of the resource's name and "-oidc-<group>-<kind>", lower case.
 */
export function oidcServiceAccountName(group: string, kind: string, name: string): string {
  return childName(name, `-oidc-${group}-${kind}`).toLowerCase();
}

/** childName is knative.dev/pkg kmeta.ChildName: parent+suffix within 63 characters, an md5 standing for what is cut. */
export function childName(parent: string, suffix: string): string {
  const longest = 63;
  const head = longest - 32;
  const md5 = (s: string) => createHash('md5').update(s).digest('hex');
  if (parent.length <= longest - suffix.length) return parent + suffix;
  if (head - suffix.length <= 0) {
    let ret = parent.slice(0, head) + md5(parent + suffix);
    const d = longest - ret.length;
    if (d > 0) ret += suffix.slice(0, d);
    return ret.replace(/[^a-zA-Z0-9]+$/, '');
  }
  return parent.slice(0, head - suffix.length) + md5(parent) + suffix;
}

/** triggerSubject is the token subject of a Trigger's OIDC identity. */
export function triggerSubject(namespace: string, trigger: string): string {
  return `system:serviceaccount:${namespace}:${oidcServiceAccountName('eventing.knative.dev', 'Trigger', trigger)}`;
}

/**
 * senderPolicyFromEnv reads SYNC_EVENT_AUTH: "oidc" (deliveries must carry a token for
 * SYNC_EVENT_AUDIENCE from one of the Triggers SYNC_EVENT_SENDERS names, as
 * namespace/name, comma-separated) or "none" (Knative runs without sender identity:
 * every delivery is accepted). It fails closed: unset, or anything else, is a
 * configuration error, so sender identity is off only where it is turned off by name.
 */
export function senderPolicyFromEnv(env: Record<string, string | undefined>): SenderPolicy | undefined {
  const mode = env.SYNC_EVENT_AUTH;
  if (mode === undefined || mode === '')
    throw new Error(
      'SYNC_EVENT_AUTH is not set: "oidc" checks the sender of every delivery (knative.yaml sets it), "none" turns that off',
    );
  if (mode === 'none') return undefined;
  if (mode !== 'oidc')
    throw new Error(`SYNC_EVENT_AUTH must be "oidc" or "none", not ${JSON.stringify(mode)}`);
  const audience = env.SYNC_EVENT_AUDIENCE?.trim();
  if (!audience) throw new Error('SYNC_EVENT_AUTH=oidc needs SYNC_EVENT_AUDIENCE');
  const senders = (env.SYNC_EVENT_SENDERS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (senders.length === 0)
    throw new Error('SYNC_EVENT_AUTH=oidc needs SYNC_EVENT_SENDERS (namespace/trigger, ...)');
  const subjects = new Set<string>();
  for (const s of senders) {
    const m = /^([a-z0-9-]+)\/([a-z0-9.-]+)$/.exec(s);
    if (!m) throw new Error(`SYNC_EVENT_SENDERS: ${JSON.stringify(s)} is not namespace/trigger`);
    subjects.add(triggerSubject(m[1]!, m[2]!));
  }
  return { audience, subjects };
}

/** Issuer is what the verifier needs of the KCP's service-account issuer. */
export interface Issuer {
  /** discovery returns the issuer's OpenID configuration (its issuer URL). */
  discovery(): Promise<{ issuer: string }>;
  /** keys returns its JSON Web Key Set. */
  keys(): Promise<JSONWebKeySet>;
}

const REFRESH_MS = 30_000;
/** ALGORITHMS are those the API server signs service-account tokens with (RSA or ECDSA keys). */
const ALGORITHMS = ['RS256', 'ES256', 'ES384', 'ES512'];

/** SenderVerifier checks the Authorization header of a delivery against a policy. */
export class SenderVerifier {
  private readonly policy: SenderPolicy;
  private readonly issuer: Issuer;
  private state?: Promise<{ issuer: string; keys: ReturnType<typeof createLocalJWKSet>; ids: Set<string> }>;
  private fetchedAt = 0;
  private readonly now: () => number;

  /** now is the clock the refresh interval is measured on (tests). */
  constructor(policy: SenderPolicy, issuer: Issuer, opts: { now?: () => number } = {}) {
    this.policy = policy;
    this.issuer = issuer;
    this.now = opts.now ?? Date.now;
  }

  private load(force = false) {
    const now = this.now();
    if (!this.state || (force && now - this.fetchedAt >= REFRESH_MS)) {
      this.fetchedAt = now;
      const next = Promise.all([this.issuer.discovery(), this.issuer.keys()]).then(([d, jwks]) => ({
        issuer: d.issuer,
        keys: createLocalJWKSet(jwks),
        ids: new Set(jwks.keys.map((k) => k.kid ?? '')),
      }));
      // A failed read is not kept: the next delivery tries again (the answer meanwhile is 503).
      next.catch(() => {
        if (this.state === next) this.state = undefined;
      });
      this.state = next;
    }
    return this.state;
  }

  /** ready reads the issuer's configuration and keys (a function does so before it takes traffic). */
  async ready(): Promise<void> {
    await this.load();
  }

  /** verify returns the token's subject, or throws SenderRefused (or the issuer's read error: answered 503, retried). */
  async verify(authorization: string | undefined): Promise<string> {
    const token = /^Bearer\s+(\S+)$/i.exec(authorization ?? '')?.[1];
    if (!token)
      throw new SenderRefused(
        401,
        'missing',
        'no bearer token: deliveries must carry the OIDC token of their Trigger',
      );
    let kid: string | undefined;
    try {
      kid = decodeProtectedHeader(token).kid;
    } catch {
      throw new SenderRefused(401, 'invalid', 'the bearer token is not a JWT');
    }
    let s = await this.load();
    if (kid !== undefined && !s.ids.has(kid)) s = await this.load(true);
    let sub: string | undefined;
    try {
      const { payload } = await jwtVerify(token, s.keys, {
        issuer: s.issuer,
        audience: this.policy.audience,
        algorithms: ALGORITHMS,
        requiredClaims: ['exp', 'sub'],
        clockTolerance: 5,
      });
      sub = payload.sub;
    } catch (err) {
      throw refusal(err);
    }
    if (!sub || !this.policy.subjects.has(sub))
      throw new SenderRefused(
        403,
        'subject',
        `a token of ${JSON.stringify(sub ?? '')} is not one of this function's Triggers`,
      );
    return sub;
  }
}

function refusal(err: unknown): SenderRefused {
  if (err instanceof errors.JWTExpired) return new SenderRefused(401, 'expired', 'the token has expired');
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === 'aud') return new SenderRefused(401, 'audience', 'the token is for another audience');
    if (err.claim === 'iss') return new SenderRefused(401, 'issuer', 'the token is from another issuer');
  }
  if (err instanceof errors.JWKSNoMatchingKey || err instanceof errors.JWSSignatureVerificationFailed)
    return new SenderRefused(401, 'issuer', "the token is not signed by the KCP's service-account issuer");
  return new SenderRefused(
    401,
    'invalid',
    `the token does not verify: ${err instanceof Error ? err.message : String(err)}`,
  );
}
