/**
 * The native addon's ropewalk.MatMulQ8 (native/src/gguf_matmul.h) against llama.cpp's arithmetic:
 * the Q8_0 and Q4_0 tensors of ../shared/models/gguf/quant-blocks.gguf, mapped to MatMulNBits
 * blocks as the importer maps them (quantized-weights.ts), multiplied by activations with every
 * case a block can have (an all-zero block, a block whose max is negative, large and tiny
 * values), by each ISA variant this CPU has, and compared with `llamaCppMatMul` (ggml's
 * definitions, from the GGUF bytes, in float64: test/helpers/llamacpp-dot.ts), with the scales as
 * float32 and as the float16 the native graph gives the op (the same sums). Then the op inside
 * a graph: stories260K's Q8_0 and Q4_0 files, whose native graph runs every matmul as MatMulQ8,
 * give the logits of the MatMulNBits graph with its half-scale emulation (the same arithmetic,
 * another implementation) within float rounding, over a teacher-forced path, but for runs where
 * one activation sits on a rounding tie (said at the assertion).
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import onnxProto from 'onnx-proto';
import { resolveModel } from '../../main/engine/model/bundle.ts';
import { CPU_TARGET, NATIVE_CPU_TARGET_ORT_ATTENTION } from '../../main/engine/model/graph-target.ts';
import { NativeDecoderSession } from '../../main/engine/model/native-session.ts';
import { openGguf } from '../../main/engine/model/gguf/gguf-file.ts';
import { quantizedFromGguf } from '../../main/engine/model/gguf/quantized-weights.ts';
import { floatsToHalves, halfToFloat } from '../../main/engine/model/gguf/quants.ts';
import { groupedSuperBlocks } from '../../main/engine/model/quantized-matmul.ts';
import { loadNativeAddon } from '../../main/engine/model/native-addon.ts';
import { BLOCKS, llamaCppMatMul, llamaCppMatMulK } from '../helpers/llamacpp-dot.ts';
import { forcedLogits } from '../helpers/forced-logits.ts';
import { GGUF_DIR } from '../helpers/paths.ts';

const status = loadNativeAddon();
const addon = status.available ? status.addon : null;
const skip = addon?.matMulQ8 ? false : `native addon without matMulQ8 (${status.available ? 'an older build' : status.reason})`;

/** m rows of k activations: row 0 with an all-zero first block and a negative-max second one, the rest varied in scale. */
function activations(m: number, k: number): Float32Array {
  const x = Float32Array.from({ length: m * k }, (_, i) => Math.sin(i * 1.37) * (1 + (i % 7)) * 0.1 * 10 ** ((Math.floor(i / k) % 3) - 1));
  x.fill(0, 0, 32);
  for (let i = 32; i < 64; i++) x[i] = -3 + 0.01 * i;
  return x;
}

test('ropewalk.MatMulQ8 computes llama.cpp\'s q8_0 × q8_0 and q4_0 × q8_0 dot products, on every ISA variant this CPU has', { skip }, async (t) => {
  const g = await openGguf(path.join(GGUF_DIR, 'quant-blocks.gguf'));
  try {
    for (const type of ['q8_0', 'q4_0'] as const) {
      const info = g.tensors.get(`blocks.${type}`)!;
      const stored = await g.readRaw(info);
      // Its [3, 512] rows 7 and 14 times over, each cut to 15 blocks: [21, 480] and [42, 480], so
      // the kernel meets two panels of 16 weight rows side by side, the second whole or partial,
      // and a partial panel alone after a pair (prefill), groups of 4 weight rows and one or two
      // left over (decode), and an odd number of blocks per row; and the [3, 512] rows as stored.
      const [rows, cols] = info.shape;
      const bytes = BLOCKS[type].bytes;
      const keep = 15;
      const repeated = (times: number) => {
        const raw = new Uint8Array(times * rows * keep * bytes);
        for (let c = 0; c < times * rows; c++) raw.set(stored.subarray((c % rows) * (cols / 32) * bytes, ((c % rows) * (cols / 32) + keep) * bytes), c * keep * bytes);
        return { raw, w: quantizedFromGguf(g.typeOf(info), raw, [times * rows, keep * 32])! };
      };
      const cases = [
        repeated(7),
        repeated(14),
        { raw: stored, w: quantizedFromGguf(g.typeOf(info), stored, info.shape)! },
      ];
      const isas = (['scalar', 'avx2', 'avx512vnni', 'amx'] as const).filter((isa) => {
        try {
          addon!.matMulQ8!(isa, new Float32Array(32), 1, new Uint8Array(32), new Float32Array(1), 1, 32, 8);
          return true;
        } catch {
          return false;
        }
      });
      assert.ok(isas.includes(addon!.matMulQ8Kernel as never), `the op's own variant (${addon!.matMulQ8Kernel}) is among those tested`);
      // Activation rows: 1 (decode); prefill's groups of 4 with 0 to 3 rows left over (VNNI); and
      // of 16, whole and with a last group that overlaps the one before (AMX).
      for (const m of [1, 2, 3, 4, 9, 11, 16, 37]) {
        for (const { raw: bytesOf, w } of cases) {
          const [n, k] = w.shape;
          const x = activations(m, k);
          const want = llamaCppMatMul(BLOCKS[type], bytesOf, n, k, x, m);
          const scale = want.reduce((a, v) => Math.max(a, Math.abs(v)), 0);
          // The graph's float16 scales (HALF_SCALE_FORMATS) hold these exactly, so both give the same sums.
          const halves = floatsToHalves(w.scales);
          assert.deepEqual(Float32Array.from(halves, halfToFloat), w.scales, `${type}: every scale round-trips through fp16`);
          for (const isa of isas) {
            const got = addon!.matMulQ8!(isa, x, m, w.data, w.scales, n, k, w.bits as 4 | 8);
            const err = got.reduce((a, v, i) => Math.max(a, Math.abs(v - want[i])), 0) / scale;
            t.diagnostic(`${type} ${isa} [${n}, ${k}] × ${m} rows: max |y − llama.cpp| / max |y| = ${err.toExponential(2)}`);
            assert.ok(err < 1e-6, `${type} [${n}, ${k}] × ${m} rows on ${isa}: ${err}`);
            assert.deepEqual(addon!.matMulQ8!(isa, x, m, w.data, halves, n, k, w.bits as 4 | 8), got, `${type} [${n}, ${k}] × ${m} rows on ${isa}: float16 scales give float32's sums`);
          }
        }
      }
    }
  } finally {
    await g.close();
  }
});

test('ropewalk.MatMulQ8K computes llama.cpp\'s q4_K, q5_K and q6_K × q8_K dot products, on every ISA variant this CPU has', { skip }, async (t) => {
  const g = await openGguf(path.join(GGUF_DIR, 'quant-blocks.gguf'));
  try {
    for (const [type, ggmlType] of [['q4_k', 12], ['q5_k', 13], ['q6_k', 14]] as const) {
      const info = g.tensors.get(`blocks.${type}`)!;
      const stored = await g.readRaw(info);
      const ref = await g.readFloat32(g.tensors.get(`blocks.${type}.ref`)!);
      const [rows, k] = info.shape; // [3, 512]: 2 super-blocks a row
      // Its rows 3 times over ([9, 512]: two groups of 4 weight rows and one left), against 9
      // activation rows (two 4-row tiles and one row alone), row 0's first 256 all zero and its
      // second with a negative value of largest magnitude.
      const n = 3 * rows;
      const blocks = new Uint8Array(n * stored.length / rows);
      const w = new Float32Array(n * k);
      for (let r = 0; r < n; r++) {
        blocks.set(stored.subarray((r % rows) * (stored.length / rows), ((r % rows) + 1) * (stored.length / rows)), r * (stored.length / rows));
        w.set(ref.subarray((r % rows) * k, ((r % rows) + 1) * k), r * k);
      }
      const m = 9;
      const x = activations(m, k);
      x.fill(0, 0, 256);
      const want = llamaCppMatMulK(w, n, k, x, m);
      const scale = want.reduce((a, v) => Math.max(a, Math.abs(v)), 0);
      const isas = (['scalar', 'avx2', 'avx512vnni'] as const).filter((isa) => {
        try {
          addon!.matMulQ8K!(isa, x.subarray(0, k), 1, blocks.subarray(0, stored.length / rows), 1, k, ggmlType);
          return true;
        } catch {
          return false;
        }
      });
      assert.ok(isas.includes(addon!.matMulQ8KKernel as never), `the op's own variant (${addon!.matMulQ8KKernel}) is among those tested`);
      // And in the graph's layout (row_groups 4: rows 0..7 in two groups, row 8 as stored), whole
      // and in the op's chunks of 4 rows (a decode step's four-row streams, each in one group).
      const grouped = groupedSuperBlocks(blocks, n, k / 256);
      for (const isa of isas) {
        for (const [layout, got] of [
          ['as stored', addon!.matMulQ8K!(isa, x, m, blocks, n, k, ggmlType)],
          ['grouped', addon!.matMulQ8K!(isa, x, m, grouped, n, k, ggmlType, undefined, 4)],
          ['grouped, chunks of 4', addon!.matMulQ8K!(isa, x, m, grouped, n, k, ggmlType, 4, 4)],
        ] as const) {
          const err = got.reduce((a, v, i) => Math.max(a, Math.abs(v - want[i])), 0) / scale;
          t.diagnostic(`${type} ${isa} [${n}, ${k}] ${layout}: max |y − llama.cpp| / max |y| = ${err.toExponential(2)}`);
          assert.ok(err < 1e-6, `${type} on ${isa}, ${layout}: ${err}`);
        }
      }
      // The prefill path on MatMulQ8's kernel (where this CPU has its VNNI panels): 9 rows (VNNI
      // panels) and 37 (AMX tiles where usable: two 16-row groups and a part).
      // 160 weight rows in the op's chunks of 80 (as its tasks run them: the second from row 80;
      // each 64 outputs on the min term's 64-wide path and 16 on its 16-wide one: the op's chunks
      // of 16 or 32 rows at K ≥ 2,048 take only that one), whole panels of 16; and in chunks of 88
      // (a part panel of 8 at the end of the first, its min term one output at a time).
      if (['avx512vnni', 'amx'].includes(addon!.matMulQ8Kernel!)) {
        const nP = 160;
        const rowBytes = stored.length / rows;
        const blocksP = new Uint8Array(nP * rowBytes);
        const wP = new Float32Array(nP * k);
        for (let r = 0; r < nP; r++) {
          blocksP.set(stored.subarray((r % rows) * rowBytes, ((r % rows) + 1) * rowBytes), r * rowBytes);
          wP.set(ref.subarray((r % rows) * k, ((r % rows) + 1) * k), r * k);
        }
        for (const rowsM of [9, 37]) {
          const xs = activations(rowsM, k);
          const wantM = llamaCppMatMulK(wP, nP, k, xs, rowsM);
          const scaleM = wantM.reduce((a, v) => Math.max(a, Math.abs(v)), 0);
          for (const [layout, got] of [
            ['as stored', addon!.matMulQ8K!('panel', xs, rowsM, blocksP, nP, k, ggmlType, 80)],
            ['grouped', addon!.matMulQ8K!('panel', xs, rowsM, groupedSuperBlocks(blocksP, nP, k / 256), nP, k, ggmlType, 80, 4)],
            ['chunks of 88', addon!.matMulQ8K!('panel', xs, rowsM, blocksP, nP, k, ggmlType, 88)],
          ] as const) {
            const err = got.reduce((a, v, i) => Math.max(a, Math.abs(v - wantM[i])), 0) / scaleM;
            t.diagnostic(`${type} panel (${addon!.matMulQ8Kernel}) ${rowsM} rows ${layout}: max |y − llama.cpp| / max |y| = ${err.toExponential(2)}`);
            assert.ok(err < 1e-6, `${type} on the panel path, ${rowsM} rows, ${layout}: ${err}`);
          }
        }
      }
    }
  } finally {
    await g.close();
  }
});

test('ropewalk.MatMulQ8 refuses sizes that disagree, naming them', { skip }, () => {
  assert.throws(() => addon!.matMulQ8!('scalar', new Float32Array(64), 1, new Uint8Array(64), new Float32Array(2), 2, 64, 8),
    (e: Error & { code?: string }) => e.code === 'ORT_ARG' && /blocks 64 bytes/.test(e.message) && /needs 64, 128, 4/.test(e.message));
  assert.throws(() => addon!.matMulQ8!('scalar', new Float32Array(48), 1, new Uint8Array(48), new Float32Array(1), 1, 48, 8),
    (e: Error & { code?: string }) => e.code === 'ORT_ARG' && /k 48 \(a multiple of 32\)/.test(e.message));
  assert.throws(() => addon!.matMulQ8!('scalar', new Float32Array(32), 1, new Uint8Array(32), new Int32Array(1) as never, 1, 32, 8),
    (e: Error & { code?: string }) => e.code === 'ORT_ARG' && /scales must be a Float32Array or a Uint16Array/.test(e.message));
});

test('stories260K Q8_0 and Q4_0 through ropewalk.MatMulQ8 give the MatMulNBits graph\'s logits within float rounding', { skip }, async (t) => {
  const cacheDir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-q8op-'));
  try {
    for (const file of ['stories260K-q8_0.gguf', 'stories260K-q4_0.gguf']) {
      const runs: Float32Array[][] = [];
      // The native graph with ONNX Runtime's attention: the matmuls are the only difference (the
      // addon's DecodeAttention rounds its sums in another order, and one float32 rounding apart
      // before a matmul can move an int8 activation by a step: test/integration/decode-attention.test.ts).
      for (const target of [NATIVE_CPU_TARGET_ORT_ATTENTION, CPU_TARGET]) {
        const bundle = await resolveModel(path.join(GGUF_DIR, file), cacheDir, undefined, { target });
        const graph = readFileSync(bundle.modelPath).toString('latin1');
        assert.equal(graph.includes('MatMulQ8'), target === NATIVE_CPU_TARGET_ORT_ATTENTION, `${file}: MatMulQ8 in the native target's graph only`);
        assert.equal(graph.includes('MatMulNBits'), target === CPU_TARGET, `${file}: every quantized matmul of the native graph is MatMulQ8`);
        assert.ok(!graph.includes('DecodeAttention'), `${file}: both graphs' attention is GroupQueryAttention`);
        if (target === NATIVE_CPU_TARGET_ORT_ATTENTION) {
          // Q8_0 / Q4_0 scales are the file's fp16 d: the op reads them as float16 (HALF_SCALE_FORMATS), as stored.
          const model = onnxProto.onnx.ModelProto.decode(readFileSync(bundle.modelPath));
          const types = new Map(model.graph!.initializer!.map((i) => [i.name!, i.dataType!]));
          const scaleTypes = model.graph!.node!.filter((n) => n.opType === 'MatMulQ8').map((n) => types.get(n.input![2]));
          assert.ok(scaleTypes.length > 0 && scaleTypes.every((ty) => ty === 10), `${file}: MatMulQ8 scales as float16 (ONNX type 10), got ${scaleTypes.join(', ')}`);
        }
        const backend = await NativeDecoderSession.create(bundle.modelPath, bundle.manifest.config);
        try {
          runs.push(await forcedLogits(backend, bundle.manifest.config, 24));
        } finally {
          await backend.dispose();
        }
      }
      const [ours, emulated] = runs;
      // Each run's max |Δlogit| / max |logit|. The two compute the same arithmetic in other float
      // orders, so they agree to float rounding, except where an activation lies within rounding of
      // a .5 step of its block's int8 grid: MatMulQ8 rounds x · (127 / max|x|) as llama.cpp's AVX2
      // quantize_row_q8_0 does, the emulation rounds x · fp16(d) / d by MatMulNBits' own scale, and
      // one int8 value apart moves that run's logits by ~1e-3 (seen: 1 run of 25 on Q8_0).
      const errs = ours.map((o, i) => {
        const scale = emulated[i].reduce((a, v) => Math.max(a, Math.abs(v)), 0);
        return o.reduce((a, v, j) => Math.max(a, Math.abs(v - emulated[i][j])), 0) / scale;
      });
      const close = errs.filter((e) => e < 2e-6).length;
      t.diagnostic(`${file}: ${close} of ${errs.length} runs within 2e-6 of max |logit| (worst ${Math.max(...errs).toExponential(2)}); per run ${errs.map((e) => e.toExponential(1)).join(' ')}`);
      assert.ok(close >= errs.length - 2, `${file}: only ${close} of ${errs.length} runs agree to float rounding`);
      assert.ok(Math.max(...errs) < 2e-2, `${file}: a run off by ${Math.max(...errs)}`);
    }
  } finally {
    rmSync(cacheDir, { recursive: true, force: true });
  }
});
