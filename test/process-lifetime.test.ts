// No cluster process outlives the run that started it, even when that run is
// killed with SIGKILL (no chance to clean up): the reaper ends them.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { eventually } from './helpers.ts';

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function startRunner(stateDir: string) {
  const script = `
    import { ClusterSet } from ${JSON.stringify(join(import.meta.dirname, '..', 'infra', 'clusters.ts'))};
    await ClusterSet.start({ skrs: 1, stateDir: ${JSON.stringify(stateDir)} });
    console.log('started');
    setInterval(() => {}, 1000);
  `;
  const runner = spawn(process.execPath, ['--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    runner.stdout!.on('data', (d: Buffer) => d.toString().includes('started') && resolve());
    runner.on('exit', (code) => reject(new Error(`runner exited early with ${code}`)));
  });
  const state = JSON.parse(await readFile(join(stateDir, 'state.json'), 'utf8')) as {
    processes: { pid: number }[];
  };
  return { runner, pids: state.processes.map((p) => p.pid) };
}

describe('process lifetime', () => {
  it.each(['SIGKILL', 'SIGTERM'] as const)(
    'a runner ended by %s leaves no cluster process behind',
    async (signal) => {
      const stateDir = await mkdtemp(join(tmpdir(), 'kcp-sync-lifetime-'));
      const { runner, pids } = await startRunner(stateDir);
      expect(pids).toHaveLength(7); // etcd, 2 x (apiserver + controller manager), the SKR's scheduler and KWOK
      expect(pids.every(alive)).toBe(true);
      runner.kill(signal);
      await eventually(async () => expect(pids.filter(alive)).toEqual([]), 20_000);
      // The state files of the contract go too: nothing claims the dead clusters still run.
      await eventually(async () => expect(existsSync(join(stateDir, 'state.json'))).toBe(false), 5_000);
      expect(existsSync(join(stateDir, 'kubeconfig', 'kcp.yaml'))).toBe(false);
      await rm(stateDir, { recursive: true, force: true });
    },
  );
});
