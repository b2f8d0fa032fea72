// fields.ts reads the fields of an event's data: each reader checks one field and
// returns it typed, or throws an EventDataError naming the field.
import { isMap } from '../values.ts';

/** EventDataError says what is wrong with an event's data (the function answers 400: redelivery cannot fix it). */
export class EventDataError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EventDataError';
  }
}

export type Data = Record<string, unknown>;
export const fail = (message: string): never => {
  throw new EventDataError(message);
};

export function str(o: Data, key: string, valid?: (s: string) => boolean, max = 253, at = 'data'): string {
  const v = o[key];
  if (typeof v !== 'string' || v === '' || v.length > max || (valid && !valid(v)))
    fail(`${at}.${key} is not valid`);
  return v as string;
}

/** text is a string field that may be empty (messages). */
export function text(o: Data, key: string, at: string): string {
  if (typeof o[key] !== 'string') fail(`${at}.${key} is not a string`);
  return o[key] as string;
}

export function count(o: Data, key: string, at = 'data'): number {
  const v = o[key];
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0)
    fail(`${at}.${key} is not a non-negative integer`);
  return v as number;
}

export function bool(o: Data, key: string, at: string): boolean {
  if (typeof o[key] !== 'boolean') fail(`${at}.${key} is not a boolean`);
  return o[key] as boolean;
}

/** optional is { [key]: read(o) } when o has key, else {}. */
export const optional = <K extends string, T>(o: Data, key: K, read: () => T): { [P in K]?: T } =>
  (o[key] === undefined ? {} : { [key]: read() }) as { [P in K]?: T };

export function list<T>(
  o: Data,
  key: string,
  at: string,
  each: (v: unknown, at: string) => T,
  max = Infinity,
): T[] {
  const v = o[key];
  if (!Array.isArray(v) || v.length > max)
    fail(`${at}.${key} is not a list${max < Infinity ? ` of at most ${max}` : ''}`);
  return (v as unknown[]).map((e) => each(e, `${at}.${key}[]`));
}

export function map(v: unknown, at: string): Data {
  if (!isMap(v)) fail(`${at} is not an object`);
  return v as Data;
}

export const oneOf = <T extends string>(o: Data, key: string, allowed: readonly T[], at = 'data'): T => {
  if (!allowed.includes(o[key] as T)) fail(`${at}.${key} is not ${allowed.join(', ')}`);
  return o[key] as T;
};

export const isTime = (s: string) => !Number.isNaN(Date.parse(s));
