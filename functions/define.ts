// define.ts makes a function's CloudEvent handler from its one definition: the routes it
// takes (which events, how their data is parsed, which step runs), and carries out the
// step's Answer (lib/pipeline/answer.ts), as the Knative Functions template's handle.
import type { CloudEvent } from 'cloudevents';
import type { Context } from 'faas-js-runtime';
import { makeEvent } from '../lib/events/contract.ts';
import { mapLimit } from '../lib/concurrency.ts';
import type { Answer, Emit } from '../lib/pipeline/answer.ts';
import type { Deps, Logger } from '../lib/pipeline/deps.ts';
import { background, post } from '../lib/pipeline/fanout.ts';
import { checkData, HttpError } from './errors.ts';
import { run, traceExtensions } from './step.ts';

/** Route is one kind of event a function takes: accepts picks it, parse reads its data (400 when bad), run is the step. */
export interface Route<R> {
  accepts: (event: CloudEvent<unknown>) => boolean;
  parse: (event: CloudEvent<unknown>) => R;
  run: (deps: Deps, request: R, log: Logger) => Promise<Answer>;
}

/** route types a route (the routes of one function take different requests). */
export const route = <R>(r: Route<R>): Route<unknown> => r as Route<unknown>;

/** ofType accepts events of the types given. */
export const ofType =
  (...types: string[]) =>
  (event: CloudEvent<unknown>): boolean =>
    types.includes(event.type);

/** Handler is a function's CloudEvent handler, as faas-js-runtime calls it. */
export type Handler = (
  context: Context,
  event?: CloudEvent<unknown>,
) => Promise<CloudEvent<unknown> | undefined>;

/** SENDS bounds the events a step sends at a time before it answers. */
const SENDS = 8;

/** defineFunction is the handler of the function step: the first route that accepts a delivery takes it. */
export function defineFunction(step: string, routes: Route<unknown>[]): Handler {
  return async (context, event) => {
    if (!event) throw new HttpError(400, 'a CloudEvent is required');
    const r = routes.find((x) => x.accepts(event));
    if (!r) throw new HttpError(400, `unexpected event type ${event.type}`);
    const request = checkData(() => r.parse(event));
    return run(context, event, step, async (d, log) =>
      answer(d, log, step, event, await r.run(d, request, log)),
    );
  };
}

/** answer carries out a step's Answer: sends, then schedules what runs after, then answers. */
async function answer(
  d: Deps,
  log: Logger,
  step: string,
  event: CloudEvent<unknown>,
  a: Answer,
): Promise<CloudEvent<unknown> | undefined> {
  const ext = traceExtensions(event);
  const make = (e: Emit) => makeEvent(step, e.type, e.data, ext);
  if (a.send) await mapLimit(a.send, SENDS, (e) => d.send(make(e)));
  const later = a.later;
  if (later)
    background(
      d,
      log,
      later.key,
      async () => {
        for (const e of later.events) await post(d, make(e), later.priority);
        return later.events.length;
      },
      { quiet: true },
    );
  if (a.fanOut) background(d, log, a.fanOut.key, a.fanOut.job);
  if (a.retry) throw new HttpError(503, a.retry);
  return a.reply ? make(a.reply) : undefined;
}
