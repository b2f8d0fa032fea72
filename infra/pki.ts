// pki.ts makes the certificates of one local cluster with openssl: a CA, the API
// server's serving certificate for 127.0.0.1/localhost, and client certificates
// (the admin's is in group system:masters). Keys are EC P-256: fast to generate.
import { execFile } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Pem is a certificate and its key, PEM-encoded. */
export interface Pem {
  cert: string;
  key: string;
}

/** ClusterPki holds the file paths and PEM contents a cluster needs. */
export interface ClusterPki {
  dir: string;
  ca: Pem;
  caFile: string;
  serving: { certFile: string; keyFile: string };
  serviceAccount: { keyFile: string; pubFile: string };
  admin: Pem;
}

async function genKey(file: string): Promise<void> {
  await run('openssl', ['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', file]);
}

/**
 * signCert issues a certificate for subject from the CA in dir; days may be negative
 * to produce an already expired certificate (for tests).
 */
export async function signCert(
  dir: string,
  name: string,
  subject: string,
  opts: { days?: number; san?: string; ca?: { certFile: string; keyFile: string } } = {},
): Promise<{ certFile: string; keyFile: string; pem: Pem }> {
  const keyFile = join(dir, `${name}.key`);
  const csr = join(dir, `${name}.csr`);
  const certFile = join(dir, `${name}.crt`);
  const ext = join(dir, `${name}.ext`);
  const ca = opts.ca ?? { certFile: join(dir, 'ca.crt'), keyFile: join(dir, 'ca.key') };
  await genKey(keyFile);
  await run('openssl', ['req', '-new', '-key', keyFile, '-subj', subject, '-out', csr]);
  const lines = ['basicConstraints=CA:FALSE', 'keyUsage=critical,digitalSignature,keyEncipherment'];
  lines.push(
    opts.san ? `extendedKeyUsage=serverAuth\nsubjectAltName=${opts.san}` : 'extendedKeyUsage=clientAuth',
  );
  await writeFile(ext, lines.join('\n') + '\n');
  // A negative number of days yields a certificate whose notAfter lies in the past.
  const validity = ['-days', String(opts.days ?? 3650)];
  await run('openssl', [
    'x509',
    '-req',
    '-in',
    csr,
    '-CA',
    ca.certFile,
    '-CAkey',
    ca.keyFile,
    '-set_serial',
    String(randomInt(1, 2 ** 47)),
    '-extfile',
    ext,
    '-out',
    certFile,
    ...validity,
  ]);
  return {
    certFile,
    keyFile,
    pem: { cert: await readFile(certFile, 'utf8'), key: await readFile(keyFile, 'utf8') },
  };
}

/** makeCa writes a self-signed CA named cn into dir. */
export async function makeCa(
  dir: string,
  cn: string,
  file = 'ca',
): Promise<Pem & { certFile: string; keyFile: string }> {
  const keyFile = join(dir, `${file}.key`);
  const certFile = join(dir, `${file}.crt`);
  await genKey(keyFile);
  await run('openssl', [
    'req',
    '-x509',
    '-new',
    '-key',
    keyFile,
    '-subj',
    `/CN=${cn}`,
    '-days',
    '3650',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
    '-out',
    certFile,
  ]);
  return { certFile, keyFile, cert: await readFile(certFile, 'utf8'), key: await readFile(keyFile, 'utf8') };
}

/** makeClusterPki creates everything a local API server and its admin need, in dir. */
export async function makeClusterPki(dir: string, cluster: string): Promise<ClusterPki> {
  const ca = await makeCa(dir, `${cluster}-ca`);
  const [serving, admin] = await Promise.all([
    signCert(dir, 'apiserver', `/CN=${cluster}-apiserver`, { san: 'IP:127.0.0.1,DNS:localhost' }),
    signCert(dir, 'admin', '/O=system:masters/CN=admin'),
  ]);
  const saKey = join(dir, 'sa.key');
  const saPub = join(dir, 'sa.pub');
  await genKey(saKey);
  await run('openssl', ['ec', '-in', saKey, '-pubout', '-out', saPub]);
  return {
    dir,
    ca: { cert: ca.cert, key: ca.key },
    caFile: ca.certFile,
    serving: { certFile: serving.certFile, keyFile: serving.keyFile },
    serviceAccount: { keyFile: saKey, pubFile: saPub },
    admin: admin.pem,
  };
}
