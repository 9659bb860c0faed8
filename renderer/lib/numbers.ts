/**
 * Numbers typed into the settings fields: plain decimal only ("1e3", "0x100", "Infinity", "1_000"
 * and "" are not numbers a person means here, though JavaScript's Number() takes them), checked
 * against a range, with the reason quoted back when refused. Pure, shared by the fields and
 * their tests.
 */

export type Parsed = { ok: true; value: number | null } | { ok: false; error: string };

const DECIMAL = /^[+-]?(\d+(\.\d*)?|\.\d+)$/;

export interface RangeOptions {
  integer?: boolean;
  /** The minimum itself is not allowed. */
  minOpen?: boolean;
  /** The maximum itself is not allowed. */
  maxOpen?: boolean;
  /** Empty text means null (e.g. "random seed"). */
  nullable?: boolean;
}

/** Parses `text` as a plain decimal number within [min, max] (bounds per `opts`). */
export function parseDecimal(text: string, min: number, max: number, opts: RangeOptions = {}): Parsed {
  const t = text.trim();
  if (t === '') return opts.nullable ? { ok: true, value: null } : { ok: false, error: 'Enter a number.' };
  if (!DECIMAL.test(t)) return { ok: false, error: `"${t.slice(0, 40)}" is not a decimal number.` };
  const n = Number(t);
  if (opts.integer && !Number.isInteger(n)) return { ok: false, error: 'Enter a whole number.' };
  if ((opts.minOpen ? n <= min : n < min) || (opts.maxOpen ? n >= max : n > max)) {
    return { ok: false, error: `Enter a number ${opts.minOpen ? 'above' : 'from'} ${min} ${opts.maxOpen ? 'and below' : 'to'} ${max}.` };
  }
  return { ok: true, value: n };
}
