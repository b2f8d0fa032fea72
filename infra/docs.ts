// docs.ts renders the parts of the docs that are facts of the code, so they cannot drift:
// the CloudEvents table of docs/contributor/architecture.md from lib/events.ts's
// EVENT_CONTRACT. `node infra/docs.ts` writes it; test/docs.test.ts fails when it differs.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { EVENT_CONTRACT } from '../lib/events.ts';

export const ARCHITECTURE = join(import.meta.dirname, '..', 'docs', 'contributor', 'architecture.md');
const BEGIN =
  '<!-- events: rendered by infra/docs.ts from lib/events.ts (EVENT_CONTRACT); do not edit by hand -->';
const END = '<!-- end of events -->';

const code = (s: string) => `\`${s}\``;

/** renderEvents is the CloudEvents table, one row per type. */
export function renderEvents(): string {
  const rows = EVENT_CONTRACT.map((e) => {
    const from = [
      ...(e.from.sources ?? []).map((s) => `${code(s)} (source)`),
      ...(e.from.steps ?? []).map(code),
    ];
    return `| ${code(e.type)} | ${from.join(', ')} | ${e.to.map(code).join(', ')} | ${code(e.source)} | ${code(e.subject)} | ${e.data.map(code).join(', ')} | ${e.what} |`;
  });
  return [
    BEGIN,
    '| type | from | to | source | subject | data | asks for |',
    '|---|---|---|---|---|---|---|',
    ...rows,
    END,
  ].join('\n');
}

/** withEvents puts the rendered table between the markers of doc. */
export function withEvents(doc: string): string {
  return replaceMarked(doc, BEGIN, END, renderEvents(), `${ARCHITECTURE} has no events markers`);
}

/** replaceMarked puts text (which starts with begin and ends with end) in place of what doc holds from begin to end. */
export function replaceMarked(
  doc: string,
  begin: string,
  end: string,
  text: string,
  missing: string,
): string {
  const from = doc.indexOf(begin);
  const to = doc.indexOf(end);
  if (from < 0 || to < from) throw new Error(missing);
  return doc.slice(0, from) + text + doc.slice(to + end.length);
}

if (import.meta.main) {
  await writeFile(ARCHITECTURE, withEvents(await readFile(ARCHITECTURE, 'utf8')));
  console.log(`${ARCHITECTURE}: CloudEvents table written`);
}
