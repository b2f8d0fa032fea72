// resolvePosted runs the resolve-cluster handler in-process (function tests) and returns
// what it posted for the SyncResource the event names: the handler answers without a
// reply and posts its result after (functions/resolve-cluster).
import type { CloudEvent } from 'cloudevents';
import type { Context } from 'faas-js-runtime';
import { expect } from 'vitest';
import { handle } from '../functions/resolve-cluster/index.ts';
import { getDeps } from '../functions/deps.ts';
import { EventTypes } from '../lib/events/contract.ts';
import { fanoutsDone } from '../lib/pipeline/fanout.ts';

/**
 * resolvePosted returns the last event posted (into sent, the tests' K_SINK) for the
 * event's SyncResource; a Kyma's request is answered with its reply instead.
 */
export async function resolvePosted(
  sent: CloudEvent<unknown>[],
  c: Context,
  e: CloudEvent<unknown>,
): Promise<CloudEvent<unknown> | undefined> {
  const name = (e.data as { name?: string } | undefined)?.name;
  const before = new Set(sent);
  const reply = await handle(c, e);
  if (e.type === EventTypes.reconcileKyma && reply) return reply;
  expect(reply).toBeUndefined();
  await fanoutsDone(await getDeps());
  return sent
    .filter(
      (x) => !before.has(x) && x.type !== EventTypes.reconcile && (x.data as { name?: string }).name === name,
    )
    .at(-1);
}
