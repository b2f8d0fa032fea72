// identity.ts validates an object's identity (apiVersion, kind, namespace, name) as
// Kubernetes defines it, before anything is resolved or a request path is built from
// it, and guards request paths themselves (a second line of defence in the client).
// Every rule rejects rather than repairs: an identity is used exactly as written or not
// at all. Look-alike Unicode is refused because only ASCII is accepted.

/** IdentityError names the identity field that is not valid and why. */
export class IdentityError extends Error {
  readonly field: string;
  constructor(field: string, problem: string) {
    super(`${field} ${problem}`);
    this.name = 'IdentityError';
    this.field = field;
  }
}

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS1035_LABEL = /^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/;
/** isDnsLabel tells whether s is a DNS-1123 label (a namespace name). */
export const isDnsLabel = (s: string): boolean => DNS1123_LABEL.test(s);

/** isDnsSubdomain tells whether s is a DNS-1123 subdomain of at most 253 characters (most object names, API groups). */
export const isDnsSubdomain = (s: string): boolean => s.length <= 253 && DNS1123_SUBDOMAIN.test(s);

const KIND = /^[A-Za-z]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?$/;
// Object names: the API server's path-segment rule (no "/", "%", not "." or "..") narrowed
// to printable ASCII that needs no escaping in a URL path: RBAC's "system:..." names pass.
const NAME = /^[A-Za-z0-9._:@+~-]{1,253}$/;

/** GroupVersion is a validated apiVersion split into group ("" for the core group) and version. */
export interface GroupVersion {
  group: string;
  version: string;
}

const show = (v: unknown): string =>
  JSON.stringify(typeof v === 'string' && v.length > 80 ? `${v.slice(0, 80)}…` : v);

/** parseApiVersion validates "version" or "group/version" (group a DNS-1123 subdomain, version a DNS-1035 label). */
export function parseApiVersion(apiVersion: string, field = 'apiVersion'): GroupVersion {
  const parts = apiVersion.split('/');
  const [group, version] =
    parts.length === 1
      ? ['', parts[0]!]
      : parts.length === 2
        ? [parts[0]!, parts[1]!]
        : [undefined, undefined];
  if (group === undefined || version === undefined)
    throw new IdentityError(field, `${show(apiVersion)} is not "version" or "group/version"`);
  if (parts.length === 2 && !isDnsSubdomain(group)) {
    throw new IdentityError(field, `${show(apiVersion)} has a group that is not a DNS-1123 subdomain`);
  }
  if (!DNS1035_LABEL.test(version))
    throw new IdentityError(field, `${show(apiVersion)} has a version that is not a DNS-1035 label`);
  return { group, version };
}

/** validateKind checks a kind: ASCII letters, digits and inner hyphens, at most 63 characters. */
export function validateKind(kind: string, field = 'kind'): void {
  if (!KIND.test(kind)) throw new IdentityError(field, `${show(kind)} is not a valid kind`);
}

/** validateNamespace checks a namespace name (DNS-1123 label). */
export function validateNamespace(namespace: string, field = 'metadata.namespace'): void {
  if (!isDnsLabel(namespace))
    throw new IdentityError(field, `${show(namespace)} is not a valid namespace name (DNS-1123 label)`);
}

/** validateName checks an object name: 1-253 printable ASCII characters without "/", "%", "?", "#" or whitespace, not "." or "..". */
export function validateName(name: string, field = 'metadata.name'): void {
  if (name === '.' || name === '..' || !NAME.test(name)) {
    throw new IdentityError(field, `${show(name)} is not a valid object name`);
  }
}

/** checkIdentity validates every field of an object's identity (IdentityError names the first that is not valid). */
export function checkIdentity(id: {
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string | undefined;
}): void {
  parseApiVersion(id.apiVersion);
  validateKind(id.kind);
  validateName(id.name);
  if (id.namespace !== undefined) validateNamespace(id.namespace);
}

/** UnsafePathError is a request path with a segment that could change what the path addresses. */
export class UnsafePathError extends Error {
  constructor(path: string, segment: string) {
    super(
      `refused request path ${show(path)}: segment ${show(segment)} is empty, "." or "..", or holds "/", "%", "?", "#", whitespace or a non-ASCII character`,
    );
    this.name = 'UnsafePathError';
  }
}

const SAFE_SEGMENT = /^[A-Za-z0-9._:@+~-]+$/;

/** checkPath refuses an absolute request path any of whose segments is empty, "." or "..", or holds anything but safe ASCII. */
export function checkPath(path: string): void {
  if (!path.startsWith('/')) throw new UnsafePathError(path, path);
  for (const segment of path.slice(1).split('/')) {
    if (segment === '.' || segment === '..' || !SAFE_SEGMENT.test(segment))
      throw new UnsafePathError(path, segment);
  }
}
