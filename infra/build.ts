// build.ts compiles the processes the product deploys (functions, the SKR source, the CLI)
// to JavaScript in dist/, as the image holds them: Node.js then loads no TypeScript
// stripper (about 19 MiB of RSS per process) and starts faster. The local runtime and the
// benchmarks run what it built; a build is skipped while dist/ is newer than every source.
import { execFile } from 'node:child_process';
import { readdirSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

export const root = join(import.meta.dirname, '..');
/** dist is where the build goes; processes run with it as their working directory (the image's /app). */
export const dist = join(root, 'dist');
const stamp = join(dist, '.built');
const sources = ['lib', 'functions', 'skr-source', 'cli'];

function newest(dir: string): number {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) t = Math.max(t, newest(p));
    else if (e.name.endsWith('.ts')) t = Math.max(t, statSync(p).mtimeMs);
  }
  return t;
}

function upToDate(): boolean {
  try {
    const built = statSync(stamp).mtimeMs;
    return sources.every((s) => newest(join(root, s)) < built);
  } catch {
    return false;
  }
}

let building: Promise<string> | undefined;

/** build compiles the sources to dist/ unless it is up to date; returns dist. */
export function build(): Promise<string> {
  return (building ??= (async () => {
    if (upToDate()) return dist;
    const started = Date.now();
    await promisify(execFile)(join(root, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.build.json'], {
      cwd: root,
    });
    // The stamp is the build's start: a source saved during the build builds again next time.
    writeFileSync(stamp, '');
    utimesSync(stamp, started / 1000, started / 1000);
    return dist;
  })());
}
