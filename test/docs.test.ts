// The docs' facts are the code's: the CloudEvents table is rendered from lib/events/table.ts and
// matches knative.yaml's Triggers, BENCHMARKS.md's figures are a run's JSON, and every link
// between the documents leads somewhere.
import { access, readdir, readFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { loadAll } from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { renderRun, replaceFigures } from '../bench/render.ts';
import type { Run } from '../bench/record.ts';
import { API, ARCHITECTURE, withEvents, withReasons } from '../infra/docs.ts';
import { CONDITIONS, ITEM_REASONS, RETRY_REASONS } from '../lib/reasons.ts';
import { ApiServerRefTypes, EventTypes, PING_TYPE } from '../lib/events/contract.ts';
import { EVENT_CONTRACT } from '../lib/events/table.ts';

const root = join(import.meta.dirname, '..');

type Filter = { exact?: { type?: string }; prefix?: { type?: string }; any?: Filter[]; all?: Filter[] };
type Trigger = {
  kind: string;
  metadata: { name: string };
  spec: { filters?: Filter[]; filter?: { attributes: { type: string } } };
};

/** typesOf collects the exact types and type prefixes a Trigger's filters name (a type named under not is not taken). */
function typesOf(t: Trigger): { exact: string[]; prefix: string[] } {
  const out = { exact: [] as string[], prefix: [] as string[] };
  const walk = (f: Filter) => {
    if (f.exact?.type) out.exact.push(f.exact.type);
    if (f.prefix?.type) out.prefix.push(f.prefix.type);
    for (const g of [...(f.any ?? []), ...(f.all ?? [])]) walk(g);
  };
  for (const f of t.spec.filters ?? []) walk(f);
  if (t.spec.filter?.attributes.type) out.exact.push(t.spec.filter.attributes.type);
  return out;
}

describe('the docs', () => {
  it('show the CloudEvents contract as lib/events/table.ts has it', async () => {
    const doc = await readFile(ARCHITECTURE, 'utf8');
    expect(doc, 'run node infra/docs.ts').toBe(withEvents(doc));
  });

  it('list every event type the code consumes and emits, each taken by the Triggers knative.yaml routes it to', async () => {
    const inCode = [...ApiServerRefTypes, PING_TYPE, ...Object.values(EventTypes)].sort();
    expect(EVENT_CONTRACT.map((e) => e.type).sort()).toEqual(inCode);
    const docs = loadAll(await readFile(join(root, 'knative.yaml'), 'utf8')) as { kind: string }[];
    const triggers = docs.filter((d): d is Trigger => d?.kind === 'Trigger');
    expect(triggers.length).toBeGreaterThan(3);
    for (const e of EVENT_CONTRACT) {
      const takers = triggers.filter((t) => {
        const { exact, prefix } = typesOf(t);
        return exact.includes(e.type) || prefix.some((p) => e.type.startsWith(p));
      });
      expect(takers.map((t) => t.metadata.name).sort(), e.type).toEqual([...e.to].sort());
    }
    // Every source the contract names is one knative.yaml defines.
    const sources = new Set(
      docs.filter((d) => /Source$/.test(d?.kind ?? '')).map((d) => (d as Trigger).metadata.name),
    );
    for (const s of EVENT_CONTRACT.flatMap((e) => e.from.sources ?? [])) expect(sources).toContain(s);
  });

  it('list every reason a status can hold, as lib/reasons.ts has them, and each is one the code writes', async () => {
    const doc = await readFile(API, 'utf8');
    expect(doc, 'run node infra/docs.ts').toBe(withReasons(doc));
    // The types keep the code from writing a reason not listed; a listed one the code never writes is a stale doc.
    const code: string[] = [];
    const walk = async (dir: string) => {
      for (const e of await readdir(join(root, dir), { withFileTypes: true })) {
        const path = join(dir, e.name);
        if (e.isDirectory()) await walk(path);
        else if (path.endsWith('.ts') && !path.endsWith('.test.ts') && path !== join('lib', 'reasons.ts'))
          code.push(await readFile(join(root, path), 'utf8'));
      }
    };
    await walk('lib');
    const source = code.join('\n');
    const listed = [
      ...Object.keys(ITEM_REASONS),
      ...Object.values(CONDITIONS).flatMap((c) => Object.keys(c)),
      ...Object.keys(RETRY_REASONS),
    ];
    // A Resources reason that is an item's state is written as the state itself (status.ts: reason = state).
    const states = ['Ready', 'Processing', 'Warning', 'Error', 'Deleting'];
    for (const r of new Set(listed)) {
      if (states.includes(r)) continue;
      expect(source.includes(`'${r}'`), `${r} is listed but no code writes it`).toBe(true);
    }
  });

  it("give one version: the image tags of knative.yaml and the docs are package.json's, which the CHANGELOG describes", async () => {
    const { version } = JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as { version: string };
    for (const f of ['knative.yaml', 'Containerfile', 'docs/user/operating.md']) {
      const tags = [...(await readFile(join(root, f), 'utf8')).matchAll(/kcp-sync-resource:([\w.-]+)/g)].map(
        (m) => m[1],
      );
      expect(tags.length, f).toBeGreaterThan(0);
      expect(new Set(tags), f).toEqual(new Set([version]));
    }
    const changelog = await readFile(join(root, 'CHANGELOG.md'), 'utf8');
    expect(changelog.match(/^## (\S+)/m)?.[1], 'the newest CHANGELOG section').toBe(version);
  });

  it("show BENCHMARKS.md's figures as the recorded run's JSON renders them", async () => {
    const run = JSON.parse(await readFile(join(root, 'bench', 'results', 'latest.json'), 'utf8')) as Run;
    expect(run.rows.length).toBeGreaterThan(20);
    const doc = await readFile(join(root, 'BENCHMARKS.md'), 'utf8');
    expect(doc, 'run node bench/render.ts bench/results/latest.json').toBe(replaceFigures(doc, run));
    expect(doc).toContain(renderRun(run));
  });

  it('link only to files that exist, and keep the README short', async () => {
    const files = ['README.md', 'BENCHMARKS.md', 'CHANGELOG.md'];
    for (const dir of ['docs/user', 'docs/contributor']) {
      for (const f of await readdir(join(root, dir))) if (f.endsWith('.md')) files.push(join(dir, f));
    }
    expect(files).toEqual(
      expect.arrayContaining([
        'docs/user/api.md',
        'docs/user/module-teams.md',
        'docs/user/operating.md',
        'docs/user/security.md',
        'docs/contributor/architecture.md',
        'docs/contributor/development.md',
      ]),
    );
    for (const f of files) {
      const text = await readFile(join(root, f), 'utf8');
      for (const [, target] of text.matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)) {
        if (/^[a-z]+:/.test(target!)) continue;
        await expect(
          access(resolve(dirname(join(root, f)), target!)).then(() => true),
          `${f} links to ${target}`,
        ).resolves.toBe(true);
      }
    }
    const readme = await readFile(join(root, 'README.md'), 'utf8');
    expect(readme.split('\n').length).toBeLessThanOrEqual(170);
  });

  it("name only source files that exist: every path in backquotes, and the code map's files in their directories", async () => {
    const files = ['README.md', 'BENCHMARKS.md'];
    for (const dir of ['docs/user', 'docs/contributor']) {
      for (const f of await readdir(join(root, dir))) if (f.endsWith('.md')) files.push(join(dir, f));
    }
    // A built file (dist/) is named by its source's path.
    const exists = (path: string) =>
      access(join(root, path.replace(/\.js$/, '.ts'))).then(
        () => true,
        () => false,
      );
    const named = /`((?:lib|functions|infra|bench|cli|skr-source|test|monitoring)\/[\w./<>*-]*\w)`/g;
    for (const f of files) {
      const text = await readFile(join(root, f), 'utf8');
      for (const [, path] of text.matchAll(named)) {
        if (/[<>*]/.test(path!)) continue;
        expect(await exists(path!), `${f} names ${path}`).toBe(true);
      }
    }
    // The code map: an entry (a line that starts at column 0, and the indented lines after
    // it) names directories and files; a bare file name is one of the entry's directories'.
    const doc = await readFile(ARCHITECTURE, 'utf8');
    const map = /## Code map\n\n```\n([\s\S]*?)```/.exec(doc)?.[1];
    expect(map, 'architecture.md has a code map').toBeDefined();
    const entries = map!.split(/\n(?=\S)/);
    let checked = 0;
    for (const entry of entries) {
      const paths = [...entry.matchAll(/[\w.-]+(?:\/[\w.<>-]*)+/g)]
        .map((m) => m[0])
        .filter((x) => !/[<>]/.test(x));
      const dirs = [...new Set(paths.map((x) => (x.endsWith('/') ? x : `${dirname(x)}/`)))];
      for (const path of paths.filter((x) => !x.endsWith('/'))) {
        expect(await exists(path), `the code map names ${path}`).toBe(true);
        checked++;
      }
      for (const [, name] of entry.matchAll(/(?<![\w/.-])([\w-]+\.ts)\b/g)) {
        const found = await Promise.all(dirs.map((d) => exists(`${d}${name}`)));
        expect(found.some(Boolean), `the code map names ${name} in ${dirs.join(' or ')}`).toBe(true);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(40);
  });
});
