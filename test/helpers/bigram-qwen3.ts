/**
 * A real Qwen3 checkpoint (synthetic-hf.ts: the family's config, the real Qwen3 tokenizer and
 * chat template) whose weights make it a bigram model with a forced reply: every attention output
 * and MLP output projection is zero, so the last hidden state is the embedding of the last token
 * fed; the embedding of each token the script knows is its own one-hot direction (every other
 * token shares one more, which leads to `<|im_end|>`), and `lm_head` maps that direction to the
 * token that follows it with a logit of about 100 (RMSNorm scales a one-hot to √hidden), far
 * beyond any sampling setting. So ONNX Runtime, the engine worker, the services and `serve` run
 * for real, and greedy or sampled, the model writes exactly `next(last token)` until EOS.
 */
import { writeSyntheticCheckpoint } from './synthetic-hf.ts';

const HIDDEN = 32;
/** The last hidden direction: tokens the script does not know; it leads to `<|im_end|>`. */
const OTHER = HIDDEN - 1;
const IM_END = 151645;
const LOGIT = 18;

/**
 * Writes the checkpoint into `dir`. `next`: token id → the token the model writes after it (at
 * most 31 entries: one hidden direction each).
 */
export async function writeBigramQwen3(dir: string, next: ReadonlyMap<number, number>): Promise<void> {
  const known = [...next.keys()];
  if (known.length > OTHER) throw new Error(`a bigram script of ${known.length} tokens needs more than ${HIDDEN} hidden dimensions`);
  const direction = new Map(known.map((t, i) => [t, i]));
  await writeSyntheticCheckpoint(dir, {
    family: 'qwen3',
    hidden: HIDDEN,
    layers: 1,
    weights: (name, shape) => {
      if (name.endsWith('o_proj.weight') || name.endsWith('down_proj.weight')) return new Float32Array(shape[0]! * shape[1]!);
      if (name === 'model.norm.weight') return new Float32Array(HIDDEN).fill(1);
      if (name === 'model.embed_tokens.weight') {
        const e = new Float32Array(shape[0]! * HIDDEN);
        for (let t = 0; t < shape[0]!; t++) e[t * HIDDEN + (direction.get(t) ?? OTHER)] = 1;
        return e;
      }
      if (name === 'lm_head.weight') {
        const w = new Float32Array(shape[0]! * HIDDEN);
        for (const [t, d] of direction) w[next.get(t)! * HIDDEN + d] = LOGIT;
        w[IM_END * HIDDEN + OTHER] = LOGIT;
        return w;
      }
      return undefined;
    },
  });
}

/** The bigram map for a reply written as token ids after the prompt's last token: distinct ids, then `<|im_end|>`. */
export function chainAfter(last: number, reply: readonly number[]): Map<number, number> {
  const chain = [last, ...reply];
  if (new Set(chain).size !== chain.length) throw new Error(`the reply repeats a token: ${chain.join(' ')}`);
  const next = new Map<number, number>();
  for (let i = 0; i < chain.length; i++) next.set(chain[i]!, chain[i + 1] ?? IM_END);
  return next;
}
