// `npm start` brings up the whole system, prints "ready", serves an example through
// the pipeline, and Ctrl-C stops every process it started.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_REPLICAS } from '../infra/runtime/index.ts';
import { kubectl } from './e2e-helpers.ts';
import { eventually } from './helpers.ts';

const root = join(import.meta.dirname, '..');
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('npm start', () => {
  it('runs the system locally until Ctrl-C', async () => {
    const stateDir = await mkdtemp(join(tmpdir(), 'kcp-sync-start-'));
    const child = spawn(
      'npm',
      ['start', '--', '--state-dir', stateDir, '--skrs', '1', '--ping-interval', '2s'],
      { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], detached: true },
    );
    // Ctrl-C in a terminal signals the whole foreground process group: npm, sh and node.
    const signal = (sig: NodeJS.Signals) => {
      try {
        process.kill(-child.pid!, sig);
      } catch {
        /* gone */
      }
    };
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    try {
      await eventually(async () => expect(out).toMatch(/^ready: /m), 90_000, 200);
      // The hint follows the ready line; stdout may deliver it in a later chunk.
      await eventually(
        async () =>
          expect(out).toContain(
            'kubectl --kubeconfig .local/kubeconfig/kcp.yaml apply -f examples/seed-scenario.yaml',
          ),
        10_000,
        100,
      );
      const state = JSON.parse(await readFile(join(stateDir, 'state.json'), 'utf8')) as {
        processes: { role: string; pid: number }[];
        clusters: Record<string, { kubeconfig: string }>;
      };
      // Five Services, two replicas each by default.
      expect(state.processes.filter((p) => p.role === 'function')).toHaveLength(5 * DEFAULT_REPLICAS);
      expect(Object.keys(state.clusters)).toEqual(['kcp', 'skr-1']);
      const kcp = state.clusters.kcp!.kubeconfig;
      await kubectl(kcp, ['apply', '-f', join(root, 'examples', 'design-example.yaml')]);
      await eventually(
        async () => {
          expect(
            await kubectl(kcp, [
              'get',
              'syncresource',
              'design-example',
              '-n',
              'kcp-system',
              '-o',
              'jsonpath={.status.state}',
            ]),
          ).toBe('Ready');
        },
        60_000,
        250,
      );
      expect(
        await kubectl(state.clusters['skr-1']!.kubeconfig, [
          'get',
          'configmap',
          'config-update',
          '-n',
          'kyma-system',
          '-o',
          'jsonpath={.data}',
        ]),
      ).toBe('{"update.properties":"foo=bar\\n"}');
      const exited = new Promise((r) => child.on('exit', r));
      signal('SIGINT');
      await exited;
      await eventually(async () => expect(state.processes.filter((p) => alive(p.pid))).toEqual([]), 20_000);
      expect(existsSync(join(stateDir, 'state.json'))).toBe(false);
      expect(existsSync(kcp)).toBe(false);
    } finally {
      signal('SIGKILL');
      await rm(stateDir, { recursive: true, force: true });
    }
  });
});
