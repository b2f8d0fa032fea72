// crd.ts reads the SyncResource CRD from the project's own knative.yaml (the one the
// KCP gets), so that offline checks use exactly the schema the API server enforces.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { loadAll } from 'js-yaml';
import type { Schema } from './schema.ts';

/** knativeYamlPath finds knative.yaml at the package root, from the sources or from a build of them. */
export function knativeYamlPath(from = import.meta.dirname): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'knative.yaml')))
      return join(dir, 'knative.yaml');
    if (dirname(dir) === dir) throw new Error(`knative.yaml not found above ${from}`);
  }
}

/** syncResourceSpecSchema returns the OpenAPI schema of a SyncResource's spec. */
export function syncResourceSpecSchema(path = knativeYamlPath()): Schema {
  const docs = loadAll(readFileSync(path, 'utf8')) as {
    kind?: string;
    metadata?: { name?: string };
    spec?: { versions?: { schema?: { openAPIV3Schema?: Schema } }[] };
  }[];
  const crd = docs.find(
    (d) =>
      d?.kind === 'CustomResourceDefinition' && d.metadata?.name === 'syncresources.operator.kyma-project.io',
  );
  const spec = crd?.spec?.versions?.[0]?.schema?.openAPIV3Schema?.properties?.spec;
  if (!spec) throw new Error(`${path} holds no SyncResource CRD with a spec schema`);
  return spec;
}
