// validate.ts checks SyncResource documents offline with the product's own code: the CRD
// schema and rules the API server enforces at admission (schema.ts), then the parser and
// the identity, restriction, protection and duplicate rules the engine applies
// (engine/plan.ts). Every finding carries the reason and message the product would
// write; what only the SKR can tell (unknown kinds, the API server's own validation,
// namespaces defaulted for namespaced kinds) is not known offline.
import type { Config } from './config.ts';
import { outsideControlPlane } from './policy/rules.ts';
import { parseItems } from './engine/plan.ts';
import { SYNC_API_VERSION, type State, type SyncItem } from './model.ts';
import { checkSchema, type Schema } from './schema.ts';
import { isDnsSubdomain } from './policy/identity.ts';
import { isMap } from './values.ts';
import { readYamlDocuments } from './yaml.ts';

/** Finding is one problem of a SyncResource, or of one of its items. */
export interface Finding {
  source: string;
  syncResource: string;
  item?: string;
  /** state is the item's state, or Rejected (admission) and Ignored (namespace) for the whole. */
  state: State | 'Rejected' | 'Ignored';
  reason: string;
  message: string;
}

/** ValidateReport is the outcome for one input. */
export interface ValidateReport {
  source: string;
  syncResources: string[];
  skipped: string[];
  findings: Finding[];
  /** unchecked lists CEL rules that cannot be evaluated offline. */
  unchecked: string[];
}

/** validateText checks every document of text (a file's content; source names it in findings). */
export function validateText(
  text: string,
  source: string,
  config: Config,
  specSchema: Schema,
): ValidateReport {
  const report: ValidateReport = { source, syncResources: [], skipped: [], findings: [], unchecked: [] };
  let docs: unknown[];
  try {
    docs = readYamlDocuments(text).filter((d) => d !== null && d !== undefined);
  } catch (err) {
    report.findings.push({
      source,
      syncResource: '',
      state: 'Error',
      reason: 'InvalidYAML',
      message: (err as Error).message.split('\n')[0]!,
    });
    return report;
  }
  for (const doc of docs) {
    if (!isMap(doc) || doc.apiVersion !== SYNC_API_VERSION || doc.kind !== 'SyncResource') {
      const d = isMap(doc) ? doc : {};
      report.skipped.push(
        `${String(d.kind ?? typeof doc)} ${String((d.metadata as { name?: unknown } | undefined)?.name ?? '')}`.trim(),
      );
      continue;
    }
    validateOne(doc, report, config, specSchema);
  }
  return report;
}

function validateOne(
  doc: Record<string, unknown>,
  report: ValidateReport,
  config: Config,
  specSchema: Schema,
): void {
  const meta = isMap(doc.metadata) ? doc.metadata : {};
  const name = `${typeof meta.namespace === 'string' ? meta.namespace : ''}/${String(meta.name ?? '')}`;
  report.syncResources.push(name);
  const add = (f: Omit<Finding, 'source' | 'syncResource'>) =>
    report.findings.push({ source: report.source, syncResource: name, ...f });
  const rejected = (message: string) => add({ state: 'Rejected', reason: 'Rejected', message });
  if (typeof meta.name !== 'string' || !isDnsSubdomain(meta.name)) {
    rejected(
      `metadata.name: Invalid value: ${JSON.stringify(meta.name ?? '')}: a lowercase RFC 1123 subdomain is required`,
    );
  }
  for (const p of checkSchema(doc.spec, { type: 'object', ...specSchema }, 'spec', report.unchecked))
    rejected(`${p.path}: ${p.message}`);
  if (doc.spec === undefined) rejected('spec: Required value');
  if (typeof meta.namespace === 'string') {
    const ignored = outsideControlPlane(meta.namespace, config);
    if (ignored) add({ state: 'Ignored', reason: 'Ignored', message: ignored });
  }
  const spec = isMap(doc.spec) ? doc.spec : {};
  const items = (Array.isArray(spec.items) ? spec.items : []).filter(
    (i): i is SyncItem => isMap(i) && typeof i.name === 'string',
  );
  for (const p of parseItems(items, config)) {
    if (p.done && p.done.state !== 'Ready' && p.done.reason !== 'ResourceSourcePending')
      add({ item: p.item.name, state: p.done.state, reason: p.done.reason, message: p.done.message });
  }
}
