// procs.ts: what the benchmarks read of a process from /proc.
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';

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

/** machineBusy is the share of every core's time spent busy (not idle or waiting on I/O) over ms, from /proc/stat. */
export async function machineBusy(ms: number): Promise<number> {
  const read = async () => {
    const cpu = (await readFile('/proc/stat', 'utf8')).split('\n')[0]!.split(/\s+/).slice(1).map(Number);
    const idle = cpu[3]! + cpu[4]!;
    return { idle, total: cpu.reduce((a, b) => a + b, 0) };
  };
  const a = await read();
  await sleep(ms);
  const b = await read();
  return b.total === a.total ? 0 : 1 - (b.idle - a.idle) / (b.total - a.total);
}

/**
 * atRest waits until the machine is busy less than share of its time over a second (at most
 * maxMs), so that a figure of one process is not one of the work the scenarios before left
 * running (rollouts in the SKRs, collections in the API servers). It returns the last share read.
 */
export async function atRest(share: number, maxMs: number): Promise<number> {
  const until = performance.now() + maxMs;
  for (;;) {
    const busy = await machineBusy(1000);
    if (busy < share || performance.now() >= until) return busy;
  }
}
