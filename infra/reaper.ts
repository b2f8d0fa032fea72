// reaper.ts is a watchdog process: it reads "pid" lines on stdin (process group
// leaders started by its parent) and, when stdin closes because the parent exited for
// any reason, even SIGKILL, it terminates those groups, so no cluster process
// outlives the run that started it.
import { createInterface } from 'node:readline';

const groups = new Set<number>();
const kill = (pid: number, sig: NodeJS.Signals): void => {
  try { process.kill(-pid, sig); } catch { /* already gone */ }
};

const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  const [op, arg] = line.trim().split(' ');
  const pid = Number(arg);
  if (!Number.isInteger(pid) || pid <= 0) return;
  if (op === 'add') groups.add(pid);
  if (op === 'del') groups.delete(pid);
});
lines.on('close', () => {
  for (const pid of groups) kill(pid, 'SIGTERM');
  setTimeout(() => {
    for (const pid of groups) kill(pid, 'SIGKILL');
    process.exit(0);
  }, 3000).unref();
  if (groups.size === 0) process.exit(0);
});
process.on('SIGINT', () => {}); // a Ctrl-C on the terminal is the parent's to handle
