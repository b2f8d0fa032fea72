// record.ts is the benchmark's own output: one run (its commit, machine, options and every
// row of figures) as JSON, the input of bench/render.ts, which writes BENCHMARKS.md's table.
import { execFileSync } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { cpus, release, totalmem } from 'node:os';

export interface Row {
  scenario: string;
  figure: string;
  value: string;
  target?: string;
}

export interface Run {
  commit: string;
  /** dirty is true when the tree had uncommitted changes as the run began: the figures are then of no commit. */
  dirty: boolean;
  /** complete is false while the run goes on (the file is rewritten after every row), and in a run that stopped before its end. */
  complete?: boolean;
  startedAt: string;
  wallSeconds: number;
  machine: { cores: number; cpu: string; memoryGiB: number; os: string; node: string };
  options: Record<string, string | boolean>;
  rows: Row[];
}

const git = (...args: string[]) => execFileSync('git', args, { encoding: 'utf8' }).trim();

/**
 * ran is the commit the run measures and whether the tree differed from it, as the run
 * began (this module loads with the benchmark): an edit made while a run goes on does not
 * change what it measured (the functions were built at the start).
 */
const ran = {
  commit: git('rev-parse', '--short', 'HEAD'),
  dirty: git('status', '--porcelain', '--untracked-files=no') !== '',
};

async function osName(): Promise<string> {
  const text = await readFile('/etc/os-release', 'utf8').catch(() => '');
  return /^PRETTY_NAME="?([^"\n]*)"?$/m.exec(text)?.[1] ?? `Linux ${release()}`;
}

export async function writeRun(
  file: string,
  startedAt: Date,
  options: Run['options'],
  rows: Row[],
  complete = true,
): Promise<void> {
  const run: Run = {
    ...ran,
    complete,
    startedAt: startedAt.toISOString(),
    wallSeconds: Math.round((Date.now() - startedAt.getTime()) / 1000),
    machine: {
      cores: cpus().length,
      cpu: cpus()[0]?.model.trim() ?? 'unknown',
      memoryGiB: Math.round(totalmem() / 2 ** 30),
      os: await osName(),
      node: process.versions.node,
    },
    options,
    rows,
  };
  await writeFile(file, `${JSON.stringify(run, null, 2)}\n`);
  if (complete) console.log(`run written to ${file}`);
}
