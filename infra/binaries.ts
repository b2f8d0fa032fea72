// binaries.ts finds or builds kube-apiserver, kube-controller-manager and etcd.
// Builds go to a cache outside the git tree, keyed by a hash of the Go module files
// and the build script, so a version change rebuilds and anything else reuses.
import { createHash } from 'node:crypto';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';

const kubeModule = join(import.meta.dirname, 'kube');

/** Binaries are the paths of the three programs a local cluster runs. */
export interface Binaries {
  kubeApiserver: string;
  kubeControllerManager: string;
  etcd: string;
  versions: { kubernetes: string; etcd: string };
}

/** cacheDir is where builds are kept: $KCP_SYNC_BIN_CACHE, else the user's cache directory. */
export function cacheDir(): string {
  const base = process.env.KCP_SYNC_BIN_CACHE
    ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'kcp-sync-resource', 'bin');
  const hash = createHash('sha256');
  for (const f of ['go.mod', 'go.sum', 'build.sh']) hash.update(readFileSync(join(kubeModule, f)));
  return join(base, hash.digest('hex').slice(0, 16));
}

function load(dir: string): Binaries | undefined {
  const versions = join(dir, 'versions.json');
  if (!existsSync(versions)) return undefined;
  return {
    kubeApiserver: join(dir, 'kube-apiserver'),
    kubeControllerManager: join(dir, 'kube-controller-manager'),
    etcd: join(dir, 'etcd'),
    versions: JSON.parse(readFileSync(versions, 'utf8')) as Binaries['versions'],
  };
}

/** ensureBinaries returns cached binaries, building them first (minutes, once) when missing. */
export async function ensureBinaries(log: (line: string) => void = () => {}): Promise<Binaries> {
  const dir = cacheDir();
  const cached = load(dir);
  if (cached) return cached;
  const tmp = `${dir}.tmp-${process.pid}`;
  await rm(tmp, { recursive: true, force: true });
  await mkdir(tmp, { recursive: true });
  log(`building kube-apiserver, kube-controller-manager and etcd into ${dir} (first run only)`);
  await new Promise<void>((resolve, reject) => {
    const child = spawn(join(kubeModule, 'build.sh'), [tmp], { stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`build.sh exited with ${code}`))));
  });
  await rename(tmp, dir).catch(async (err: unknown) => {
    // Another process finished the same build first: keep theirs.
    if (!load(dir)) throw err;
    await rm(tmp, { recursive: true, force: true });
  });
  const built = load(dir);
  if (!built) throw new Error(`build finished but ${dir} holds no versions.json`);
  return built;
}

if (import.meta.main) {
  const b = await ensureBinaries((l) => console.log(l));
  console.log(JSON.stringify(b, null, 2));
}
