// profile.ts sums the V8 CPU profiles the function processes wrote (npm run bench --
// --cpu-prof DIR): self time by where the code lives (a package of node_modules, a file
// of the project, Node's internals, the garbage collector), over every process, so that
// "where does the product's CPU go" is answered by a measurement.
//   node bench/profile.ts DIR [top]
import { readFileSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { SourceMap } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

/** where names the place a frame's code lives. */
export function where(url: string, fn: string): string {
  if (!url) return fn.startsWith('(') ? fn : '(native)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)?.[1];
  if (pkg) return pkg;
  if (url.startsWith('node:')) return 'node:internal';
  const own = /\/work\/[^/]+\/(.+)$/.exec(url)?.[1] ?? /((?:lib|functions|infra)\/.+)$/.exec(url)?.[1];
  return own ?? url;
}

/** maps holds the source map of each bundled file a profile names (undefined: none). */
const maps = new Map<string, SourceMap | undefined>();

/**
 * sourceOf is the file a frame's code came from: the processes run bundled (infra/build.ts),
 * and the bundle's source maps name the module of each line.
 */
export function sourceOf(frame: Node['callFrame']): string {
  if (!frame.url.startsWith('file:')) return frame.url;
  const file = fileURLToPath(frame.url);
  if (!maps.has(file)) {
    let map: SourceMap | undefined;
    try {
      map = new SourceMap(JSON.parse(readFileSync(`${file}.map`, 'utf8')));
    } catch {
      map = undefined;
    }
    maps.set(file, map);
  }
  const entry = maps.get(file)?.findEntry(frame.lineNumber, frame.columnNumber);
  if (!entry || !('originalSource' in entry)) return frame.url;
  return new URL(entry.originalSource, frame.url).href;
}

/** summarize returns self time (ms) by place over profiles. */
export function summarize(profiles: Profile[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const p of profiles) {
    // A node's place, found once (through the source map), for all of its samples.
    const placeOf = new Map(
      p.nodes.map((n) => [n.id, where(sourceOf(n.callFrame), n.callFrame.functionName)]),
    );
    p.samples.forEach((id, i) => {
      const key = placeOf.get(id)!;
      out.set(key, (out.get(key) ?? 0) + (p.timeDeltas[i] ?? 0) / 1000);
    });
  }
  return out;
}

if (import.meta.main) {
  const [dir, top = '25'] = process.argv.slice(2);
  if (!dir) throw new Error('usage: node bench/profile.ts DIR [top]');
  const files = (await readdir(dir)).filter((f) => f.endsWith('.cpuprofile'));
  const profiles = await Promise.all(
    files.map(async (f) => JSON.parse(await readFile(join(dir, f), 'utf8')) as Profile),
  );
  const sums = summarize(profiles);
  sums.delete('(idle)');
  const total = [...sums.values()].reduce((a, b) => a + b, 0);
  console.log(`${files.length} profiles, ${(total / 1000).toFixed(1)} s of CPU (idle excluded)`);
  for (const [k, v] of [...sums].sort((a, b) => b[1] - a[1]).slice(0, Number(top)))
    console.log(
      `${((100 * v) / total).toFixed(1).padStart(5)} %  ${(v / 1000).toFixed(2).padStart(7)} s  ${k}`,
    );
}
