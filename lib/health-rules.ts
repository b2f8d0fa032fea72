// health-rules.ts compiles and evaluates an item's own health rules (items[].health): CEL
// expressions over the live object, as Flux's healthCheckExprs. health.ts turns their
// verdict into the object's health.
import { createRequire } from 'node:module';
import type { KubeObject } from './kube/objects.ts';
import { ManifestError } from './manifest.ts';
import type { HealthRules } from './model.ts';

type Obj = Record<string, unknown>;

// CEL: the object's top-level fields are the expression's variables (apiVersion, kind,
// metadata, spec, status, data), as in Flux's healthCheckExprs. Cost is bounded at compile
// time (the expression's length and AST) and by the object's size (lists bound each macro).
const CEL_FIELDS = ['apiVersion', 'kind', 'metadata', 'spec', 'status', 'data'] as const;
/** MAX_EXPRESSION bounds a health expression's length (characters). */
export const MAX_EXPRESSION = 1024;
type Cel = typeof import('@marcbachmann/cel-js');
let env: InstanceType<Cel['Environment']> | undefined;
/**
 * celEnv is the CEL environment, built for the first item that has health rules: most
 * processes never meet one, so the library is loaded then, not at start-up (RSS at rest,
 * BENCHMARKS.md).
 */
function celEnv(): InstanceType<Cel['Environment']> {
  if (env) return env;
  const { Environment } = createRequire(import.meta.url)('@marcbachmann/cel-js') as Cel;
  env = new Environment({
    limits: { maxAstNodes: 256, maxDepth: 32, maxListElements: 64, maxMapEntries: 64, maxCallArguments: 8 },
  });
  for (const f of CEL_FIELDS) env.registerVariable(f, 'dyn');
  return env;
}

type Program = (ctx: Obj) => unknown;
/** CompiledRules are an item's health expressions, compiled once. */
export interface CompiledRules {
  current: Program;
  failed?: Program;
  inProgress?: Program;
  text: HealthRules;
}

function compileOne(name: string, expr: string): Program {
  if (expr.length > MAX_EXPRESSION)
    throw new ManifestError(
      `health.${name} is ${expr.length} characters, over the limit of ${MAX_EXPRESSION}`,
    );
  try {
    const checked = celEnv().check(expr) as { valid: boolean; error?: Error; type?: string };
    if (!checked.valid) throw checked.error ?? new Error('does not type-check');
    if (checked.type !== 'bool' && checked.type !== 'dyn')
      throw new Error(`is of type ${checked.type}, not bool`);
    return celEnv().parse(expr) as unknown as Program;
  } catch (err) {
    throw new ManifestError(`health.${name} does not compile: ${(err as Error).message.split('\n')[0]}`);
  }
}

/** compileRules compiles an item's health rules, or throws a ManifestError naming the expression (the item is InvalidManifest). */
export function compileRules(rules: HealthRules): CompiledRules {
  return {
    current: compileOne('current', rules.current),
    ...(rules.failed !== undefined ? { failed: compileOne('failed', rules.failed) } : {}),
    ...(rules.inProgress !== undefined ? { inProgress: compileOne('inProgress', rules.inProgress) } : {}),
    text: rules,
  };
}

/** celValue turns JSON into CEL values: integers are CEL ints (BigInt). */
function celValue(v: unknown): unknown {
  if (typeof v === 'number') return Number.isInteger(v) ? BigInt(v) : v;
  if (Array.isArray(v)) return v.map(celValue);
  if (v !== null && typeof v === 'object')
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, celValue(x)]));
  return v;
}

/**
 * evaluateRules says which of inProgress, failed, then current (Flux's order) holds first,
 * if any, and why others could not be evaluated. An expression that cannot be evaluated on
 * this object (a field not there yet) is not true.
 */
export function evaluateRules(
  rules: CompiledRules,
  o: KubeObject,
): { holds: keyof HealthRules | undefined; errors: string[] } {
  const ctx = Object.fromEntries(CEL_FIELDS.map((f) => [f, celValue((o as Obj)[f] ?? null)]));
  const errors: string[] = [];
  const holds = (name: keyof HealthRules, p: Program | undefined) => {
    if (!p) return false;
    try {
      return p(ctx) === true;
    } catch (err) {
      errors.push(`health.${name}: ${(err as Error).message.split('\n')[0]}`);
      return false;
    }
  };
  if (holds('inProgress', rules.inProgress)) return { holds: 'inProgress', errors };
  if (holds('failed', rules.failed)) return { holds: 'failed', errors };
  if (holds('current', rules.current)) return { holds: 'current', errors };
  return { holds: undefined, errors };
}
