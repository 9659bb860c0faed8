/**
 * The CLI's line for model load progress (stderr, on a terminal only): the phase in words (the
 * window's: main/contract/load-phase.ts), and while the weights are written the percentage, bytes
 * and seconds left, e.g.
 *   "importing the model: writing weights 42% (0.9 of 2.2 GB, about 6 s left)".
 */
import { loadPhaseWords } from '../contract/load-phase.ts';
import type { LoadProgressDetail } from '../engine-host/protocol.ts';

/** One progress line (no newline); the phase worded as in the window. Unknown phases are shown as they are. */
export function formatLoadProgress(phase: string, fraction: number, detail: LoadProgressDetail = {}): string {
  const what = loadPhaseWords(phase);
  if (phase !== 'write' || detail.bytes === undefined || detail.totalBytes === undefined) return `importing the model: ${what}`;
  const gb = (b: number) => (b / 1e9).toFixed(1);
  const eta = detail.etaSeconds === undefined ? '' : `, about ${detail.etaSeconds} s left`;
  return `importing the model: ${what} ${Math.floor(fraction * 100)}% (${gb(detail.bytes)} of ${gb(detail.totalBytes)} GB${eta})`;
}
