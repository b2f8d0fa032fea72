// changeset.ts: what one run did to each object, named "kind/namespace/name"
// (Flux's ssa ChangeSet); status is computed from it.

/** Action is what happened to one object. */
/** released: an adopted object was given back (our marks removed), not deleted; recreated: deleted and created anew (an immutable field changed). */
export type Action =
  'created' | 'configured' | 'unchanged' | 'skipped' | 'deleted' | 'released' | 'recreated';

/** Change is one entry of a change set. */
export interface Change {
  /** subject is "kind/namespace/name" (namespace empty for cluster-scoped objects). */
  subject: string;
  action: Action;
  item?: string;
  /** drift marks a re-apply that reverted changes made in the SKR; cause names the fields and the managers that changed them. */
  drift?: boolean;
  cause?: { paths: string[]; managers: string[] };
}

/** subjectOf renders the change-set name of an object. */
export const subjectOf = (id: { kind: string; namespace?: string; name: string }): string =>
  `${id.kind}/${id.namespace ?? ''}/${id.name}`;

/** summarize counts actions, e.g. for lastOperation and logs. */
export function summarize(changes: Change[]): Record<Action, number> {
  const out: Record<Action, number> = {
    created: 0,
    configured: 0,
    unchanged: 0,
    skipped: 0,
    deleted: 0,
    released: 0,
    recreated: 0,
  };
  for (const c of changes) out[c.action]++;
  return out;
}

/** describeCorrection renders a drift correction for events and logs: "ConfigMap kyma-system/x: data.k changed by kubectl-edit; reverted". */
export function describeCorrection(c: Change): string {
  const [kind, ns, ...name] = c.subject.split('/');
  const paths = c.cause?.paths.length
    ? c.cause.paths.slice(0, 5).join(', ') + (c.cause.paths.length > 5 ? ', …' : '')
    : 'fields';
  const by = c.cause?.managers.length ? ` by ${c.cause.managers.join(', ')}` : '';
  return `${kind} ${ns ? `${ns}/` : ''}${name.join('/')}: ${paths} changed${by}; reverted`;
}
