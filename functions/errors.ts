// errors.ts maps a step's failure to the HTTP answer the broker acts on: 5xx is retried,
// 4xx is not (redelivery cannot fix it).
import { EventDataError } from '../lib/events/parse.ts';
import { KubeApiError, SyncError } from '../lib/kube/errors.ts';

/** HttpError carries the status code faas-js-runtime answers with. */
export class HttpError extends Error {
  readonly code: number;
  constructor(code: number, message: string, cause?: unknown) {
    super(message, { cause });
    this.name = 'HttpError';
    this.code = code;
  }
}

/** checkData runs an event-data check, turning its EventDataError into a 400 (redelivery cannot fix bad data). */
export function checkData<T>(check: () => T): T {
  try {
    return check();
  } catch (err) {
    if (err instanceof EventDataError) throw new HttpError(400, err.message, err);
    throw err;
  }
}

/** mapError turns a failure into the answer the broker acts on: 5xx retries, 4xx does not. */
export function mapError(err: unknown): HttpError {
  if (err instanceof HttpError) return err;
  if (err instanceof SyncError)
    return new HttpError(err.transient ? 503 : 422, `${err.reason}: ${err.message}`, err);
  if (err instanceof KubeApiError)
    return new HttpError(err.transient || err.code >= 500 ? 503 : 500, err.message, err);
  return new HttpError(500, err instanceof Error ? err.message : String(err), err);
}
