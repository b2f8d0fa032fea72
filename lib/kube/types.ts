// types.ts: the shape of a Kubernetes object as the product reads and writes it (no imports,
// so that the model and the client can both depend on it).

/** KubeObject is any Kubernetes object as plain JSON. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    generation?: number;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    deletionTimestamp?: string;
    finalizers?: string[];
    [k: string]: unknown;
  };
  [k: string]: unknown;
}
