// procs.ts: what the benchmarks read of a process from /proc.
import { readFile } from 'node:fs/promises';

/** cpuSeconds is a process's user and system CPU so far; a process that is gone (one a scenario killed) counts nothing. */
export async function cpuSeconds(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  if (!stat) return 0;
  const fields = stat.split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** rssOf is a process's resident memory in MiB: now (VmRSS) or its peak (VmHWM). */
export async function rssOf(pid: number, field: 'VmHWM' | 'VmRSS'): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)![1]) / 1024;
}

/** cpuMsPer is each process group's CPU between two readings (seconds by group), in ms per unit of work (n). */
export const cpuMsPer = (
  before: Record<string, number>,
  after: Record<string, number>,
  n: number,
): [string, number][] => Object.entries(after).map(([g, s]) => [g, ((s - before[g]!) * 1000) / n]);
