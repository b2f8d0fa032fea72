// render.ts writes the figures of one benchmark run (the JSON of `npm run bench -- --json
// FILE`) into BENCHMARKS.md, between its two "figures" markers, so the table is always the
// output of a run and names that run's commit and machine:
//   node bench/render.ts FILE [BENCHMARKS.md]
import { readFile, writeFile } from 'node:fs/promises';
import { replaceMarked } from '../infra/docs.ts';
import type { Run } from './record.ts';

const BEGIN = "<!-- figures: written by bench/render.ts from a run's JSON; do not edit by hand -->";
const END = '<!-- end of figures -->';

const cell = (s: string) => s.replaceAll('|', '\\|');

export function renderRun(run: Run): string {
  const { machine: m } = run;
  const flags = Object.entries(run.options)
    .filter(([, v]) => v !== false)
    .map(([k, v]) => (v === true ? `--${k}` : `--${k} ${v}`));
  const lines = [
    BEGIN,
    `Commit \`${run.commit}\`${run.dirty ? ' (with uncommitted changes)' : ''}, ${run.startedAt.slice(0, 10)}, ` +
      `\`npm run bench -- ${flags.join(' ')}\`, ${Math.round(run.wallSeconds / 60)} minutes` +
      (run.complete === false ? ', stopped before its end (the rows it had measured).' : '.'),
    `Machine: ${m.cores} vCPUs (${m.cpu}), ${m.memoryGiB} GiB RAM, ${m.os}, Node.js ${m.node}.`,
    '',
    '| scenario | figure | value | target |',
    '|---|---|---|---|',
    ...run.rows.map(
      (r) => `| ${cell(r.scenario)} | ${cell(r.figure)} | ${cell(r.value)} | ${cell(r.target ?? '')} |`,
    ),
    END,
  ];
  return lines.join('\n');
}

/** replaceFigures puts the rendered run between the markers of doc; it refuses a doc without them. */
export function replaceFigures(doc: string, run: Run): string {
  return replaceMarked(doc, BEGIN, END, renderRun(run), 'BENCHMARKS.md has no figures markers');
}

if (import.meta.main) {
  const [file, doc = 'BENCHMARKS.md'] = process.argv.slice(2);
  if (!file) throw new Error('usage: node bench/render.ts RUN.json [BENCHMARKS.md]');
  const run = JSON.parse(await readFile(file, 'utf8')) as Run;
  await writeFile(doc, replaceFigures(await readFile(doc, 'utf8'), run));
  console.log(`${doc}: figures of ${run.commit} written`);
}
