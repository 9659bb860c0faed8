/**
 * What each part of the CUDA float16 graph costs in agreement with its float32 reference: for
 * each model, the float16 graph with CUDA's rounding (test/helpers/cuda-arithmetic.ts) as it is
 * and with each given set of op types computed in float32 (`withFloat32Ops`), teacher-forced 64
 * steps (test/helpers/float16-agreement.ts): top-1 agreement, max |Δ log p| over the float32
 * top-8 and where it was. A measurement for choosing the graph's precision, not a test.
 *
 *   npx tsx test/bench/float16-parts.ts [--float32 'MatMulNBits,Cast;GroupQueryAttention'] [model …]
 *
 * Models default to stories260K and its Q8_0 / Q4_0 / Q5_1 GGUF files. A set's ops run in
 * float32 together (values between two of them unrounded); include 'Cast' to also leave the
 * graph's own float16 Casts out.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { withCudaArithmetic, withFloat32Ops } from '../helpers/cuda-arithmetic.ts';
import { float16Agreement } from '../helpers/float16-agreement.ts';
import { GGUF_DIR, STORIES_BIN } from '../helpers/paths.ts';

const { values, positionals } = parseArgs({ options: { float32: { type: 'string', default: '' } }, allowPositionals: true });
const sets = (values.float32 ?? '').split(';').map((s) => s.trim()).filter(Boolean);
const models = positionals.length ? positionals : [STORIES_BIN, ...['q8_0', 'q4_0', 'q5_1'].map((q) => path.join(GGUF_DIR, `stories260K-${q}.gguf`))];
const cacheDir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-float16-parts-'));
try {
  for (const source of models) {
    for (const set of ['', ...sets]) {
      const ops = new Set(set.split(',').filter(Boolean));
      const rewrite = (m: Uint8Array) => withCudaArithmetic(ops.size ? withFloat32Ops(m, ops) : m);
      const r = await float16Agreement(source, cacheDir, { rewrite });
      const w = r.worst;
      console.log(`${path.basename(source).padEnd(24)} ${(set || 'as built').padEnd(40)} top-1 ${(r.agree * 100).toFixed(1).padStart(5)} %  max |Δ log p| ${r.maxDiff.toExponential(2)} (step ${w.step}, rank ${w.rank}, log p ${w.logProb.toFixed(2)})`);
    }
  }
} finally {
  rmSync(cacheDir, { recursive: true, force: true });
}
