import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { build, cacheDir } from './binaries.ts';

describe('the cold build of a module', () => {
  let root: string;
  let saved: string | undefined;
  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'binaries-test-'));
    saved = process.env.KCP_SYNC_BIN_CACHE;
    process.env.KCP_SYNC_BIN_CACHE = join(root, 'cache');
  });
  afterEach(async () => {
    if (saved === undefined) delete process.env.KCP_SYNC_BIN_CACHE;
    else process.env.KCP_SYNC_BIN_CACHE = saved;
    await rm(root, { recursive: true, force: true });
  });

  const moduleWith = async (script: string) => {
    const module = join(root, 'mod');
    await rm(module, { recursive: true, force: true });
    await mkdir(module);
    await writeFile(join(module, 'go.mod'), 'module example.com/m\n');
    await writeFile(join(module, 'go.sum'), '');
    await writeFile(join(module, 'build.sh'), `#!/usr/bin/env bash\nset -e\nout=$1\n${script}\n`);
    await chmod(join(module, 'build.sh'), 0o755);
    return module;
  };

  it("names each binary with n of m and the time so far, and keeps the Go tool's lines in its log", async () => {
    const module = await moduleWith(
      [
        'echo "::step one"',
        'echo "go: downloading example.com/dep v1.0.0" >&2',
        'touch "$out/one"',
        'echo "::step two"',
        'touch "$out/two"',
        'echo "{}" > "$out/versions.json"',
      ].join('\n'),
    );
    const lines: string[] = [];
    const dir = await build(module, 'two programs', (l) => lines.push(l), ['one', 'two']);
    expect(dir).toBe(cacheDir(module));
    const progress = lines.filter((l) => /^  building /.test(l));
    expect(progress).toHaveLength(2);
    expect(progress[0]).toMatch(/building one \(1 of 2 of infra\/mod\), \dm\d\ds so far/);
    expect(progress[1]).toMatch(/building two \(2 of 2 of infra\/mod\), \dm\d\ds so far/);
    expect(lines.join('\n')).not.toContain('go: downloading');
    expect(await readFile(`${dir}.log`, 'utf8')).toContain('go: downloading example.com/dep v1.0.0');
    // Built once: a second call finds the cache and logs nothing.
    const again: string[] = [];
    await build(module, 'two programs', (l) => again.push(l), ['one', 'two']);
    expect(again).toEqual([]);
  });

  it("fails with the end of the Go tool's output (its download lines left out), and caches nothing", async () => {
    const module = await moduleWith(
      'echo "::step one"\necho "main.go:3: undefined: x" >&2\necho "go: downloading example.com/dep v1.0.0" >&2\nexit 3',
    );
    await expect(build(module, 'one program', () => {}, ['one'])).rejects.toThrow(
      /exited with 3; the end of .*\.log:\nmain\.go:3: undefined: x$/,
    );
    await expect(readFile(join(cacheDir(module), 'versions.json'))).rejects.toThrow(/ENOENT/);
  });
});
