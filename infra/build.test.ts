// build.ts: what the image runs is a bundle; a CPU profile of it still names each frame's
// package or file (bench/profile.ts reads the bundle's source maps).
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { sourceOf, where } from '../bench/profile.ts';
import { build, dist } from './build.ts';

/** frameAt is a profile's call frame for the first line of dist/chunks that holds text (0-based, as V8 gives them). */
async function frameAt(text: string) {
  for (const f of await readdir(join(dist, 'chunks'))) {
    if (!f.endsWith('.js')) continue;
    const lines = (await readFile(join(dist, 'chunks', f), 'utf8')).split('\n');
    const lineNumber = lines.findIndex((l) => l.includes(text));
    if (lineNumber >= 0)
      return {
        functionName: '',
        url: pathToFileURL(join(dist, 'chunks', f)).href,
        lineNumber,
        columnNumber: lines[lineNumber]!.indexOf(text),
      };
  }
  throw new Error(`${text} is in no chunk`);
}

describe('build', () => {
  it("bundles the function server with source maps that name each frame's package or file", async () => {
    await build();
    const served = await readFile(join(dist, 'functions', 'serve.js'), 'utf8');
    // The entry point is the bundle's: its steps are chunks of their own.
    expect(served).toMatch(/import\("\.\.\/chunks\/apply-items-[\w-]+\.js"\)/);
    const fastify = await frameAt('function fastify(');
    expect(where(fastify.url, '')).toMatch(/^dist\/chunks\//);
    expect(where(sourceOf(fastify), '')).toBe('fastify');
    const own = await frameAt('function mergeRequests(');
    expect(where(sourceOf(own), '')).toMatch(/(^|\/)lib\/pipeline\/apply-items\.js$/);
  });
});
