import { describe, expect, it } from 'vitest';
import { exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose';
import {
  childName,
  oidcServiceAccountName,
  SenderRefused,
  SenderVerifier,
  senderPolicyFromEnv,
  triggerSubject,
  type Issuer,
} from './senders.ts';

describe('childName (knative.dev/pkg kmeta.ChildName)', () => {
  // The cases of kmeta's own names_test.go.
  it.each([
    ['asdf', '-deployment', 'asdf-deployment'],
    ['f'.repeat(63), '-deployment', 'ffffffffffffffffffff105d7597f637e83cc711605ac3ea4957-deployment'],
    ['f'.repeat(63), '-deploy', 'ffffffffffffffffffffffff105d7597f637e83cc711605ac3ea4957-deploy'],
    ['f'.repeat(63), 'f'.repeat(63), 'fffffffffffffffffffffffffffffff0502661254f13c89973cb3a83e0cbec0'],
    ['a', 'f'.repeat(63), 'ab5cfd486935decbc0d305799f4ce4414ffffffffffffffffffffffffffffff'],
    ['b'.repeat(32), 'f'.repeat(32), 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb329c7c81b9ab3ba71aa139066aa5625d'],
    ['aaaa', 'b---a'.repeat(20), 'aaaa7a3f7966594e3f0849720eced8212c18b---ab---ab---ab---ab---ab'],
    ['a'.repeat(17), 'a.-.-.-.-.-.-.' + 'a'.repeat(37), 'aaaaaaaaaaaaaaaaaa1eb10dc911444f8434af83b7225442da'],
  ])('%s + %s', (parent, suffix, want) => {
    expect(childName(parent, suffix)).toBe(want);
  });

  it("names a Trigger's OIDC ServiceAccount as the eventing controller does", () => {
    // As the controller named them on the local stack (Trigger status.auth.serviceAccountName).
    expect(oidcServiceAccountName('eventing.knative.dev', 'Trigger', 'sync-apply-items')).toBe(
      'sync-apply-items-oidc-eventing.knative.dev-trigger',
    );
    expect(triggerSubject('kcp-system', 'sync-resolve-cluster')).toBe(
      'system:serviceaccount:kcp-system:sync-resolve-cluster-oidc-eventing.knative.dev-trigger',
    );
  });
});

describe('senderPolicyFromEnv', () => {
  it('is off only when told so by name: unset is an error, not a quiet "off"', () => {
    expect(senderPolicyFromEnv({ SYNC_EVENT_AUTH: 'none' })).toBeUndefined();
    expect(() => senderPolicyFromEnv({})).toThrow(/SYNC_EVENT_AUTH is not set/);
    expect(() => senderPolicyFromEnv({ SYNC_EVENT_AUTH: '' })).toThrow(/SYNC_EVENT_AUTH is not set/);
  });

  it('reads the audience and the Triggers', () => {
    const p = senderPolicyFromEnv({
      SYNC_EVENT_AUTH: 'oidc',
      SYNC_EVENT_AUDIENCE: 'aud-1',
      SYNC_EVENT_SENDERS: 'ns/t-one, ns/t-two',
    })!;
    expect(p.audience).toBe('aud-1');
    expect([...p.subjects]).toEqual([triggerSubject('ns', 't-one'), triggerSubject('ns', 't-two')]);
  });

  it.each([
    [{ SYNC_EVENT_AUTH: 'yes' }, /must be "oidc" or "none"/],
    [{ SYNC_EVENT_AUTH: 'oidc', SYNC_EVENT_SENDERS: 'ns/t' }, /needs SYNC_EVENT_AUDIENCE/],
    [{ SYNC_EVENT_AUTH: 'oidc', SYNC_EVENT_AUDIENCE: 'a' }, /needs SYNC_EVENT_SENDERS/],
    [
      { SYNC_EVENT_AUTH: 'oidc', SYNC_EVENT_AUDIENCE: 'a', SYNC_EVENT_SENDERS: 'just-a-name' },
      /not namespace\/trigger/,
    ],
  ])('refuses a configuration that cannot be meant: %j', (env, err) => {
    expect(() => senderPolicyFromEnv(env)).toThrow(err);
  });
});

describe('SenderVerifier', () => {
  const ISS = 'https://issuer.example';
  const SUB = triggerSubject('ns', 'trig');
  const policy = { audience: 'aud', subjects: new Set([SUB]) };

  async function keyPair(kid: string) {
    const { privateKey, publicKey } = await generateKeyPair('RS256');
    return { privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' } as JWK };
  }
  function issuer(keys: () => JWK[], issuerUrl = ISS): Issuer & { reads: number } {
    const i = {
      reads: 0,
      discovery: async () => ({ issuer: issuerUrl }),
      keys: async () => {
        i.reads++;
        return { keys: keys() };
      },
    };
    return i;
  }
  const sign = (
    key: Awaited<ReturnType<typeof generateKeyPair>>['privateKey'],
    kid: string,
    claims: { iss?: string; aud?: string; sub?: string; exp?: number | string },
  ) => {
    const jwt = new SignJWT({})
      .setProtectedHeader({ alg: 'RS256', kid })
      .setIssuedAt()
      .setIssuer(claims.iss ?? ISS)
      .setAudience(claims.aud ?? 'aud')
      .setSubject(claims.sub ?? SUB)
      .setExpirationTime(claims.exp ?? '10m');
    return jwt.sign(key);
  };
  const refusal = async (p: Promise<unknown>) => {
    const err = await p.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(SenderRefused);
    return { code: (err as SenderRefused).code, reason: (err as SenderRefused).reason };
  };

  it("accepts a token of the Trigger's identity, for the audience, from the issuer", async () => {
    const k = await keyPair('k1');
    const v = new SenderVerifier(
      policy,
      issuer(() => [k.jwk]),
    );
    expect(await v.verify(`Bearer ${await sign(k.privateKey, 'k1', {})}`)).toBe(SUB);
  });

  it('refuses no token, not a JWT, another audience, another issuer, another key, an expired token, another subject', async () => {
    const k = await keyPair('k1');
    const other = await keyPair('k1');
    const v = new SenderVerifier(
      policy,
      issuer(() => [k.jwk]),
    );
    const past = Math.floor(Date.now() / 1000) - 60;
    expect(await refusal(v.verify(undefined))).toEqual({ code: 401, reason: 'missing' });
    expect(await refusal(v.verify('Basic abc'))).toEqual({ code: 401, reason: 'missing' });
    expect(await refusal(v.verify('Bearer not.a.jwt'))).toEqual({ code: 401, reason: 'invalid' });
    expect(await refusal(v.verify(`Bearer ${await sign(k.privateKey, 'k1', { aud: 'other' })}`))).toEqual({
      code: 401,
      reason: 'audience',
    });
    expect(
      await refusal(v.verify(`Bearer ${await sign(k.privateKey, 'k1', { iss: 'https://other' })}`)),
    ).toEqual({ code: 401, reason: 'issuer' });
    // Signed by another key with the same key id: the signature does not verify.
    expect(await refusal(v.verify(`Bearer ${await sign(other.privateKey, 'k1', {})}`))).toEqual({
      code: 401,
      reason: 'issuer',
    });
    expect(await refusal(v.verify(`Bearer ${await sign(k.privateKey, 'k1', { exp: past })}`))).toEqual({
      code: 401,
      reason: 'expired',
    });
    expect(
      await refusal(
        v.verify(`Bearer ${await sign(k.privateKey, 'k1', { sub: 'system:serviceaccount:ns:intruder' })}`),
      ),
    ).toEqual({ code: 403, reason: 'subject' });
  });

  it('reads the keys again for an unknown key id (rotation), at most once per interval', async () => {
    const old = await keyPair('old');
    const next = await keyPair('new');
    let published = [old.jwk];
    const iss = issuer(() => published);
    let clock = 1_000_000;
    const v = new SenderVerifier(policy, iss, { now: () => clock });
    await v.ready();
    expect(iss.reads).toBe(1);
    published = [old.jwk, next.jwk];
    const rotated = `Bearer ${await sign(next.privateKey, 'new', {})}`;
    // Within the interval of the last read, an unknown key id is refused without a read...
    expect((await refusal(v.verify(rotated))).code).toBe(401);
    expect(iss.reads).toBe(1);
    // ...after it, the keys are read again and the rotated key verifies.
    clock += 30_000;
    expect(await v.verify(rotated)).toBe(SUB);
    expect(iss.reads).toBe(2);
    // A stream of unknown key ids (a forger's) does not make it read the keys for each.
    const forger = await keyPair('forged');
    for (let i = 0; i < 5; i++)
      expect((await refusal(v.verify(`Bearer ${await sign(forger.privateKey, 'forged', {})}`))).code).toBe(
        401,
      );
    expect(iss.reads).toBe(2);
  });

  it('keeps no failed read of the issuer: the next delivery tries again', async () => {
    const k = await keyPair('k1');
    let up = false;
    const v = new SenderVerifier(policy, {
      discovery: async () => {
        if (!up) throw new Error('connection refused');
        return { issuer: ISS };
      },
      keys: async () => ({ keys: [k.jwk] }),
    });
    const token = `Bearer ${await sign(k.privateKey, 'k1', {})}`;
    await expect(v.verify(token)).rejects.toThrow(/connection refused/);
    up = true;
    expect(await v.verify(token)).toBe(SUB);
  });
});
