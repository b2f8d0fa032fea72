// errors.ts: typed errors of the product. Every failure is either transient (retry
// later: the broker gets a 5xx) or terminal (bad input: written to status, acked).
import { CLUSTER_REASONS, type ClusterReason, type ItemReason, type RetryReason } from '../reasons.ts';

/** SyncError is the base of the product's errors; `transient` says whether a retry can help. */
export class SyncError<R extends ItemReason | RetryReason = ItemReason | RetryReason> extends Error {
  readonly transient: boolean;
  /** reason is the machine-readable reason shown on the item or the SyncResource (lib/reasons.ts). */
  readonly reason: R;
  constructor(message: string, opts: { reason: R; transient: boolean; cause?: unknown }) {
    super(message, { cause: opts.cause });
    this.name = new.target.name;
    this.reason = opts.reason;
    this.transient = opts.transient;
  }
}

/** TransientError is a failure that a later attempt can overcome. */
export class TransientError extends SyncError {
  constructor(message: string, reason: ItemReason | RetryReason, cause?: unknown) {
    super(message, { reason, transient: true, cause });
  }
}

/** TerminalError is a failure that retrying the same input cannot fix: its reason goes into the status. */
export class TerminalError<R extends ItemReason = ItemReason> extends SyncError<R> {
  constructor(message: string, reason: R, cause?: unknown) {
    super(message, { reason, transient: false, cause });
  }
}

/** isResolutionFailure tells a terminal failure to resolve the target cluster (its reason is the SyncResource's). */
export const isResolutionFailure = (err: unknown): err is TerminalError<ClusterReason> =>
  err instanceof TerminalError && Object.hasOwn(CLUSTER_REASONS, err.reason);

/** Status is the body of a Kubernetes API error response (metav1.Status). */
export interface Status {
  kind?: string;
  status?: string;
  message?: string;
  reason?: string;
  code?: number;
  details?: { retryAfterSeconds?: number; causes?: { message?: string; field?: string }[] };
}

/** KubeApiError is a non-2xx answer of an API server, or a failure to reach it (code 0). */
export class KubeApiError extends Error {
  readonly code: number;
  readonly status: Status | undefined;
  readonly retryAfterSeconds: number | undefined;
  readonly cluster: string;
  constructor(
    cluster: string,
    method: string,
    path: string,
    code: number,
    status?: Status,
    opts: { cause?: unknown; retryAfterSeconds?: number } = {},
  ) {
    const what = code === 0 ? 'unreachable' : `${code} ${status?.reason ?? ''}`.trim();
    super(`${method} ${path} on ${cluster}: ${what}: ${status?.message ?? describeCause(opts.cause)}`, {
      cause: opts.cause,
    });
    this.name = 'KubeApiError';
    this.code = code;
    this.status = status;
    this.cluster = cluster;
    this.retryAfterSeconds = opts.retryAfterSeconds ?? status?.details?.retryAfterSeconds;
  }

  /** transient tells whether a retry may succeed: unreachable, 5xx, 409, 429. */
  get transient(): boolean {
    return this.code === 0 || this.code >= 500 || this.code === 409 || this.code === 429;
  }

  /** authFailure tells whether the credential or the TLS trust failed (evict cached clients). */
  get authFailure(): boolean {
    return this.code === 401 || (this.code === 0 && isTlsError(this.cause));
  }
}

/** isNotFound tells whether err is a 404 from the API server. */
export const isNotFound = (err: unknown): boolean => err instanceof KubeApiError && err.code === 404;

/** isConflict tells whether err is a 409 from the API server. */
export const isConflict = (err: unknown): boolean => err instanceof KubeApiError && err.code === 409;

/**
 * lostRace tells whether err, or the error it wraps, is a guarded write that another
 * writer beat: a 409, or a JSON patch whose test of the resourceVersion failed (422).
 */
export function lostRace(err: unknown): boolean {
  for (let e = err; e instanceof Error; e = e.cause) {
    if (e instanceof KubeApiError) return e.code === 409 || e.code === 422;
  }
  return false;
}

function describeCause(cause: unknown): string {
  if (cause instanceof Error) {
    const code = (cause as { code?: string }).code;
    return code ? `${code}: ${cause.message}` : cause.message;
  }
  return 'no response';
}

const tlsCodes = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO|SELF_SIGNED|ERR_OSSL)/;

/** isTlsError tells whether err (or a cause of it) is a TLS handshake or certificate failure. */
export function isTlsError(err: unknown): boolean {
  for (let e = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && tlsCodes.test(code)) return true;
    if (/certificate|alert|handshake|tls/i.test(e.message)) return true;
  }
  return false;
}
