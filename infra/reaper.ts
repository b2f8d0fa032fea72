// reaper.ts is a watchdog process. It reads lines on stdin from its parent:
// "add <pid>" for each process group leader started, "dir <path>" for files to
// remove. When stdin closes because the parent exited for any reason, even SIGKILL,
// it terminates those groups and removes those paths, so no cluster process and no
// stale state outlives the run that started it.
import { rmSync } from 'node:fs';
import { createInterface } from 'node:readline';

const groups = new Set<number>();
const dirs = new Set<string>();
const kill = (pid: number, sig: NodeJS.Signals): void => {
  try {
    process.kill(-pid, sig);
  } catch {
    /* already gone */
  }
};

const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  const [op, ...rest] = line.trim().split(' ');
  const arg = rest.join(' ');
  if (op === 'dir') dirs.add(arg);
  if (op === 'undir') dirs.delete(arg);
  const pid = Number(arg);
  if (!Number.isInteger(pid) || pid <= 0) return;
  if (op === 'add') groups.add(pid);
  if (op === 'del') groups.delete(pid);
});
const finish = (): never => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  process.exit(0);
};
lines.on('close', () => {
  for (const pid of groups) kill(pid, 'SIGTERM');
  setTimeout(() => {
    for (const pid of groups) kill(pid, 'SIGKILL');
    setTimeout(finish, 200);
  }, 3000);
  if (groups.size === 0) finish();
});
process.on('SIGINT', () => {}); // a Ctrl-C on the terminal is the parent's to handle
