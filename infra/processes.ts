// processes.ts starts long-running child processes in their own process groups,
// logs them to files, and registers each with a reaper that kills them if this
// process dies without stopping them.
import { spawn, type ChildProcess } from 'node:child_process';
import { openSync, closeSync } from 'node:fs';
import { join } from 'node:path';

/** Proc is a started child process and how to stop it. */
export interface Proc {
  role: string;
  cluster: string;
  pid: number;
  child: ChildProcess;
  logFile: string;
  /** exited settles when the process has ended, with its exit code or signal. */
  exited: Promise<number | string>;
}

let reaper: ChildProcess | undefined;

function reaperProcess(): ChildProcess {
  if (reaper && reaper.exitCode === null) return reaper;
  reaper = spawn(process.execPath, [join(import.meta.dirname, 'reaper.ts')], {
    stdio: ['pipe', 'ignore', 'inherit'],
    detached: true,
  });
  reaper.unref();
  const stdin = reaper.stdin as import('node:net').Socket;
  stdin.on('error', () => {});
  stdin.unref(); // the pipe must not keep this process alive; it exists to close when we exit
  return reaper;
}

function tell(line: string): void {
  reaperProcess().stdin?.write(`${line}\n`);
}

/** startProcess spawns cmd with args, output appended to logDir/<role>-<cluster>.log. */
export function startProcess(
  role: string,
  cluster: string,
  cmd: string,
  args: string[],
  opts: { logDir: string; env?: NodeJS.ProcessEnv; cwd?: string },
): Proc {
  const logFile = join(opts.logDir, `${role}-${cluster}.log`);
  const fd = openSync(logFile, 'a');
  const child = spawn(cmd, args, {
    stdio: ['ignore', fd, fd],
    detached: true, // own process group: stop() and the reaper kill the whole group
    env: opts.env ?? process.env,
    cwd: opts.cwd,
  });
  closeSync(fd);
  if (child.pid === undefined) throw new Error(`cannot start ${role} for ${cluster}: ${cmd}`);
  const pid = child.pid;
  tell(`add ${pid}`);
  const exited = new Promise<number | string>((resolve) => {
    child.on('exit', (code, signal) => {
      tell(`del ${pid}`);
      resolve(code ?? signal ?? 'unknown');
    });
    child.on('error', () => resolve('spawn-error'));
  });
  child.unref();
  return { role, cluster, pid, child, logFile, exited };
}

/** stopProcess sends SIGTERM to the group, then SIGKILL after graceMs, and waits for exit. */
export async function stopProcess(p: Proc, graceMs = 5000): Promise<void> {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return;
  const signal = (sig: NodeJS.Signals) => {
    try {
      process.kill(-p.pid, sig);
    } catch {
      /* gone */
    }
  };
  signal('SIGTERM');
  const timer = setTimeout(() => signal('SIGKILL'), graceMs);
  await p.exited;
  clearTimeout(timer);
}

/** killProcess ends the group at once (SIGKILL), as a crash would. */
export async function killProcess(p: Proc): Promise<void> {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return;
  try {
    process.kill(-p.pid, 'SIGKILL');
  } catch {
    /* gone */
  }
  await p.exited;
}

/** reapDir asks the reaper to remove dir if this process dies before cleaning up. */
export function reapDir(dir: string, remove = true): void {
  tell(`${remove ? 'dir' : 'undir'} ${dir}`);
}

/** releaseReaper closes the reaper's stdin after a clean stop so it exits too. */
export function releaseReaper(): void {
  reaper?.stdin?.end();
  reaper = undefined;
}
