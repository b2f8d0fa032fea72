// validate.ts checks SyncResource documents offline with the product's own code: the CRD
// schema and rules the API server enforces at admission (schema.ts), then the parser and
// the identity, restriction, protection and duplicate rules the engine applies
// (engine/plan.ts). Every finding carries the reason and message the product would
// write; what only the SKR can tell (unknown kinds, the API server's own validation,
// namespaces defaulted for namespaced kinds) is not known offline. With a SyncPolicy, a
// team's SyncResource is checked against it by the product's own rule (policy/tenancy.ts),
// the scope of each kind taken from CLUSTER_SCOPED (the built-in cluster-scoped kinds; any
// other is taken as namespaced, where the product asks the SKR's discovery).
import type { Config } from './config.ts';
import { parseItems } from './engine/plan.ts';
import { parseApiVersion } from './policy/identity.ts';
import { governance, isControlPlane, itemRefusal, type SyncPolicy } from './policy/tenancy.ts';
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
  /** state is the item's state, or Rejected (admission) for the whole. */
  state: State | 'Rejected';
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

/** CLUSTER_SCOPED are the built-in cluster-scoped kinds ("group/Kind"), for checking a policy offline. */
const CLUSTER_SCOPED = new Set([
  '/Namespace',
  '/Node',
  '/PersistentVolume',
  'rbac.authorization.k8s.io/ClusterRole',
  'rbac.authorization.k8s.io/ClusterRoleBinding',
  'apiextensions.k8s.io/CustomResourceDefinition',
  'storage.k8s.io/StorageClass',
  'storage.k8s.io/CSIDriver',
  'storage.k8s.io/CSINode',
  'storage.k8s.io/VolumeAttachment',
  'scheduling.k8s.io/PriorityClass',
  'admissionregistration.k8s.io/ValidatingWebhookConfiguration',
  'admissionregistration.k8s.io/MutatingWebhookConfiguration',
  'admissionregistration.k8s.io/ValidatingAdmissionPolicy',
  'admissionregistration.k8s.io/ValidatingAdmissionPolicyBinding',
  'apiregistration.k8s.io/APIService',
  'networking.k8s.io/IngressClass',
  'node.k8s.io/RuntimeClass',
  'certificates.k8s.io/CertificateSigningRequest',
  'flowcontrol.apiserver.k8s.io/FlowSchema',
  'flowcontrol.apiserver.k8s.io/PriorityLevelConfiguration',
]);

/** validateText checks every document of text (a file's content; source names it in findings), against policy when given. */
export function validateText(
  text: string,
  source: string,
  config: Config,
  specSchema: Schema,
  policy?: SyncPolicy,
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
    validateOne(doc, report, config, specSchema, policy);
  }
  return report;
}

function validateOne(
  doc: Record<string, unknown>,
  report: ValidateReport,
  config: Config,
  specSchema: Schema,
  policy: SyncPolicy | undefined,
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
  // A team's SyncResource (a namespace that is not a control-plane one, or none named while a policy is given).
  let governed: SyncPolicy | undefined;
  const namespace = typeof meta.namespace === 'string' ? meta.namespace : undefined;
  if (namespace !== undefined && !isControlPlane(namespace, config)) {
    const g = governance(namespace, policy ? [policy] : [], config);
    if (g.kind === 'refused')
      add({
        state: 'Error',
        reason: 'NotPermitted',
        message: policy ? g.why : `${g.why} (kcp-sync validate --policy FILE checks it against one)`,
      });
    if (g.kind === 'policy') governed = g.policy;
  } else if (namespace === undefined) governed = policy;
  const spec = isMap(doc.spec) ? doc.spec : {};
  const items = (Array.isArray(spec.items) ? spec.items : []).filter(
    (i): i is SyncItem => isMap(i) && typeof i.name === 'string',
  );
  for (const p of parseItems(items, config)) {
    if (p.done && p.done.state !== 'Ready' && p.done.reason !== 'ResourceSourcePending') {
      add({ item: p.item.name, state: p.done.state, reason: p.done.reason, message: p.done.message });
      continue;
    }
    if (!governed || !p.id) continue;
    const group = parseApiVersion(p.id.apiVersion).group;
    const namespaced = !CLUSTER_SCOPED.has(`${group}/${p.id.kind}`);
    const refused = itemRefusal(
      governed,
      {
        group,
        kind: p.id.kind,
        name: p.id.name,
        namespaced,
        namespace: namespaced ? (p.id.namespace ?? config.defaultNamespace) : undefined,
      },
      p.item.strategy,
    );
    if (refused) add({ item: p.item.name, state: 'Error', reason: 'NotPermitted', message: refused });
  }
}
