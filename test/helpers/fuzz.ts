/**
 * Test helper for seeded fuzzing: runs one case with a time bound and sorts its end into
 * `ok` (it worked), `typed` (an EngineError / ServiceError / DocumentError: the clear error the app shows) or a
 * finding (anything else thrown, or no end within the bound), and tracks the process's resident
 * memory so a case that allocates far more than its input justifies is a finding too.
 */
import { DocumentError } from '../../main/documents/errors.ts';
import { EngineError } from '../../main/engine/errors.ts';
import { ServiceError } from '../../main/services/errors.ts';

export type CaseEnd = { kind: 'ok' } | { kind: 'typed'; code: string } | { kind: 'finding'; what: string };

/** Runs `f` within `boundMs`; an untyped throw, a timeout or RSS growth past `maxRssGrowth` bytes is a finding. */
export async function runCase(f: () => Promise<unknown>, boundMs: number, maxRssGrowth: number): Promise<CaseEnd> {
  const rss0 = process.memoryUsage.rss();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<CaseEnd>((resolve) => {
    timer = setTimeout(() => resolve({ kind: 'finding', what: `no end within ${boundMs} ms` }), boundMs);
  });
  const run = f().then(
    (): CaseEnd => ({ kind: 'ok' }),
    (e: unknown): CaseEnd =>
      e instanceof EngineError || e instanceof ServiceError || e instanceof DocumentError
        ? { kind: 'typed', code: String(e.code) }
        : { kind: 'finding', what: `untyped ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`.slice(0, 300) },
  );
  const end = await Promise.race([run, timeout]);
  clearTimeout(timer);
  const grew = process.memoryUsage.rss() - rss0;
  if (end.kind !== 'finding' && grew > maxRssGrowth) return { kind: 'finding', what: `resident memory grew ${Math.round(grew / 2 ** 20)} MB` };
  return end;
}

/** Tally of case ends by kind, with the first findings (at most 20) described. */
export class FuzzTally {
  readonly counts = new Map<string, number>();
  readonly findings: string[] = [];
  add(label: string, end: CaseEnd): void {
    const key = end.kind === 'typed' ? `typed ${end.code}` : end.kind;
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
    if (end.kind === 'finding' && this.findings.length < 20) this.findings.push(`${label}: ${end.what}`);
  }
  get total(): number {
    return [...this.counts.values()].reduce((a, b) => a + b, 0);
  }
  summary(): string {
    return [...this.counts].map(([k, v]) => `${k} ${v}`).join(', ');
  }
}
