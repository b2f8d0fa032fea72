// unreachable.ts tells a failure of the cluster from a failure of one request: an SKR that
// cannot be reached, or that refuses our credential, ends the run (ClusterUnreachable);
// every other refusal stays on the item it concerns.
import { KubeApiError } from '../kube/errors.ts';
import { isClusterFailure } from '../policy/rules.ts';

/** ClusterUnreachableError aborts a run: the SKR cannot be reached or refuses our credential. */
export class ClusterUnreachableError extends Error {
  constructor(cause: KubeApiError) {
    super(`SKR ${cause.cluster} is unreachable: ${cause.message}`, { cause });
    this.name = 'ClusterUnreachableError';
  }
}

/** inSkr runs a request to the SKR; a failure of the cluster (no answer, credential refused) becomes ClusterUnreachableError, which ends the run. */
export async function inSkr<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof KubeApiError && isClusterFailure(err)) throw new ClusterUnreachableError(err);
    throw err;
  }
}
