/**
 * The one rule for the caution about a max context above the model's trained context, shared by
 * `npm run chat -- --max-context N` (a `note:` line on stderr) and the window's Max context field
 * (shown under the field as it is typed). Such a max context is allowed (the RoPE tables extend
 * past it), but the model never saw those positions in training. Dependency-free, so the renderer
 * imports it as is.
 */

/** `2048` → `2,048`, the same in Node and Chromium. */
const count = (n: number): string => n.toLocaleString('en-US');

/**
 * The caution for `maxContext` (positions: prompt + answer) against `trainedContext` (positions
 * the model was trained on), as one sentence, or null when there is nothing to caution about:
 * `maxContext <= trainedContext`, or the trained context is unknown (null, undefined, or not a
 * positive number, e.g. before a model loads). Both are token counts; the sentence writes them
 * with thousands separators.
 * e.g. (2048, 512) → "Max context 2,048 is above the model's trained context (512): answers lose
 * quality past it; 512 or less keeps them at full quality."; (512, 512) → null.
 */
export function maxContextCaution(maxContext: number, trainedContext: number | null | undefined): string | null {
  if (trainedContext === null || trainedContext === undefined || !(trainedContext > 0)) return null;
  if (!(maxContext > trainedContext)) return null;
  const trained = count(trainedContext);
  return `Max context ${count(maxContext)} is above the model's trained context (${trained}): answers lose quality past it; ${trained} or less keeps them at full quality.`;
}
