// build.ts compiles the processes the product deploys (functions, the SKR source, the CLI)
// to JavaScript in dist/, as the image holds them: Node.js then loads no TypeScript
// stripper (about 19 MiB of RSS per process) and starts faster. The two long-running
// entry points (the function server and the SKR source) are then bundled in place: one
// file each and a chunk per step, in place of some 400 modules to resolve and load (a
// function's imports take half the time: BENCHMARKS.md, the function server bundled).
// The local runtime and the benchmarks run what it built; a build is skipped while dist/
// is newer than every source. The Containerfile runs the same build.
import { execFile } from 'node:child_process';
import { readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { build as bundle } from 'rolldown';

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
    // This file too: it says how the build is made.
    return (
      statSync(import.meta.filename).mtimeMs < built && sources.every((s) => newest(join(root, s)) < built)
    );
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
    await bundleEntries();
    // The stamp is the build's start: a source saved during the build builds again next time.
    writeFileSync(stamp, '');
    utimesSync(stamp, started / 1000, started / 1000);
    return dist;
  })());
}

/** The entry points bundled, as the image runs them (Containerfile, knative.yaml). */
const entries = ['functions/serve', 'skr-source/main'];
/** The OpenTelemetry Node SDK stays in node_modules: it is loaded only when an OTLP exporter is configured. */
const external = ['@opentelemetry/sdk-node'];

/**
 * A Patch changes one line of a dependency as the bundle takes it in, into one line. The
 * build fails when the line is not found (a new version of the dependency: see whether the
 * patch is still needed).
 */
interface Patch {
  file: string;
  from: string;
  to: string;
}

/**
 * patches quiets faas-js-runtime. Its health probes (replaced by serve.ts's own) build
 * overload-protection, whose loopbench sampler wakes the process every 5 ms for its whole
 * life, and its /metrics collects prom-client's default metrics, among them an event-loop
 * delay histogram sampling every 10 ms: together most of an idle function's CPU, for every
 * process Knative keeps (BENCHMARKS.md, CPU at rest), for figures no dashboard of ours
 * reads (a function's CPU and memory are its container's). Its faas_* counters stay. And
 * its metrics module assigns an undeclared variable, which a CommonJS module may do and a
 * module of the bundle (strict) may not.
 */
const patches: Patch[] = [
  {
    file: 'overload-protection/index.js',
    from: "var loopbench = require('loopbench')",
    to: "var loopbench = (opts) => { var sampler = require('loopbench')(opts); sampler.stop(); return sampler }",
  },
  {
    file: 'faas-js-runtime/lib/metrics.js',
    from: '  collectDefaultMetrics({ register });',
    to: '',
  },
  {
    file: 'faas-js-runtime/lib/metrics.js',
    from: "const { cpu, mem, netstat } = osu = require('node-os-utils');",
    to: "const osu = require('node-os-utils'); const { cpu, mem, netstat } = osu;",
  },
];

/** bundleEntries bundles each entry's compiled JavaScript over itself; shared code goes to dist/chunks/. */
async function bundleEntries(): Promise<void> {
  rmSync(join(dist, 'chunks'), { recursive: true, force: true });
  const applied = new Set<Patch>();
  await bundle({
    input: Object.fromEntries(entries.map((e) => [e, join(dist, `${e}.js`)])),
    platform: 'node',
    external: (id) => external.some((p) => id === p || id.startsWith(`${p}/`)),
    logLevel: 'warn',
    plugins: [
      {
        name: 'patches',
        transform(code, id) {
          const mine = patches.filter((p) => id.endsWith(`/node_modules/${p.file}`));
          if (mine.length === 0) return null;
          for (const p of mine) {
            if (!code.includes(p.from)) throw new Error(`${p.file} no longer holds: ${p.from}`);
            code = code.replace(p.from, p.to);
            applied.add(p);
          }
          // Each patch keeps its line where it was: the source map stays as it is.
          return { code, map: null };
        },
      },
    ],
    output: {
      dir: dist,
      format: 'esm',
      entryFileNames: '[name].js',
      chunkFileNames: 'chunks/[name]-[hash].js',
      // A CPU profile names the bundle's lines; bench/profile.ts maps them back to their sources.
      sourcemap: true,
    },
  });
  const missed = patches.filter((p) => !applied.has(p));
  if (missed.length > 0) throw new Error(`not in the bundle: ${missed.map((p) => p.file).join(', ')}`);
}

// `node infra/build.ts` (npm install's prepare, the Containerfile) builds.
if (import.meta.main) await build();
