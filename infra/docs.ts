// docs.ts renders the parts of the docs that are facts of the code, so they cannot drift:
// the CloudEvents table of docs/contributor/architecture.md from lib/events/table.ts's
// EVENT_CONTRACT, and the reasons of docs/user/api.md from lib/reasons.ts. `node
// infra/docs.ts` writes them; test/docs.test.ts fails when they differ.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { EVENT_CONTRACT } from '../lib/events/table.ts';
import { CONDITIONS, ITEM_REASONS, RETRY_REASONS } from '../lib/reasons.ts';

export const ARCHITECTURE = join(import.meta.dirname, '..', 'docs', 'contributor', 'architecture.md');
export const API = join(import.meta.dirname, '..', 'docs', 'user', 'api.md');
const BEGIN =
  '<!-- events: rendered by infra/docs.ts from lib/events/table.ts (EVENT_CONTRACT); do not edit by hand -->';
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

const REASONS_BEGIN = '<!-- reasons: rendered by infra/docs.ts from lib/reasons.ts; do not edit by hand -->';
const REASONS_END = '<!-- end of reasons -->';

/** renderReasons is the tables of every reason a status can hold: items', then each condition's. */
export function renderReasons(): string {
  const table = (head: string, rows: [string, { state: string; when: string }][]) => [
    `| ${head} | state | when |`,
    '|---|---|---|',
    ...rows.map(([r, e]) => `| ${code(r)} | ${e.state === 'any' ? '' : code(e.state)} | ${e.when} |`),
  ];
  return [
    REASONS_BEGIN,
    "`status.items[].reason`, with the item's state:",
    '',
    ...table('item reason', Object.entries(ITEM_REASONS)),
    ...Object.entries(CONDITIONS).flatMap(([type, reasons]) => [
      '',
      `\`status.conditions[type=${type}].reason\`, with the SyncResource's state it goes with:`,
      '',
      ...table(`${type} reason`, Object.entries(reasons)),
    ]),
    '',
    `A run that ends in a retry (the broker redelivers it; the status stays as it was) says why in the step's log: ${Object.entries(
      RETRY_REASONS,
    )
      .map(([r, when]) => `${code(r)} (${when})`)
      .join(', ')}.`,
    REASONS_END,
  ].join('\n');
}

/** withReasons puts the rendered reasons between the markers of doc. */
export function withReasons(doc: string): string {
  return replaceMarked(doc, REASONS_BEGIN, REASONS_END, renderReasons(), `${API} has no reasons markers`);
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
  await writeFile(API, withReasons(await readFile(API, 'utf8')));
  console.log(`${API}: reasons written`);
}
