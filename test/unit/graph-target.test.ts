/**
 * Which graph the engine loads per execution provider (graph-target.ts): the CPU graph on cpu,
 * the float32 WebGPU graph on webgpu, the float16 CUDA graph on cuda (issue 16: its
 * GroupQueryAttention has no float32 kernel); llama.cpp's int8-activation emulation only in the
 * float32 CPU and WebGPU graphs; cuda float32 refused as a target.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidOptionError } from '../../main/engine/errors.ts';
import { CPU_TARGET, CUDA_FLOAT32_REFERENCE, emulatesLlamaCpp, engineGraphTarget, graphTarget, NATIVE_CPU_TARGET, NATIVE_KERNELS_VERSION, targetKey } from '../../main/engine/model/graph-target.ts';

test('without a dtype: cpu → the CPU graph, webgpu → float32, cuda → float16', () => {
  assert.equal(engineGraphTarget(), CPU_TARGET);
  assert.equal(engineGraphTarget('cpu'), CPU_TARGET);
  assert.deepEqual(engineGraphTarget('webgpu'), { ep: 'webgpu', dtype: 'float32' });
  assert.deepEqual(engineGraphTarget('cuda'), { ep: 'cuda', dtype: 'float16' });
  assert.deepEqual(engineGraphTarget('cpu', 'float16'), { ep: 'cpu', dtype: 'float16' });
});

test('cuda float32 is refused as a target, quoting why; it exists only as the CPU-run reference', () => {
  assert.throws(() => engineGraphTarget('cuda', 'float32'), (e: unknown) => e instanceof InvalidOptionError && /GroupQueryAttention/.test(e.message));
  assert.deepEqual(CUDA_FLOAT32_REFERENCE, { ep: 'cuda', dtype: 'float32' });
});

test('llama.cpp emulation: float32 cpu and webgpu graphs only', () => {
  assert.equal(emulatesLlamaCpp(CPU_TARGET), true);
  assert.equal(emulatesLlamaCpp(graphTarget('webgpu')), true);
  assert.equal(emulatesLlamaCpp(graphTarget('cuda')), false);
  assert.equal(emulatesLlamaCpp(CUDA_FLOAT32_REFERENCE), false);
  assert.equal(emulatesLlamaCpp(graphTarget('cpu', 'float16')), false);
});

test('the native CPU target: chosen only when asked for on cpu float32, its own bundle key', () => {
  assert.equal(engineGraphTarget('cpu', undefined, true), NATIVE_CPU_TARGET);
  assert.equal(engineGraphTarget('cpu', 'float32', true), NATIVE_CPU_TARGET);
  assert.equal(engineGraphTarget('cpu', 'float32'), CPU_TARGET);
  assert.deepEqual(engineGraphTarget('cpu', 'float16', true), { ep: 'cpu', dtype: 'float16' });
  assert.deepEqual(engineGraphTarget('webgpu', undefined, true), { ep: 'webgpu', dtype: 'float32' });
  assert.equal(targetKey(CPU_TARGET), '');
  assert.equal(targetKey(NATIVE_CPU_TARGET), `:cpu-float32-native-v${NATIVE_KERNELS_VERSION}`);
  assert.ok(emulatesLlamaCpp(NATIVE_CPU_TARGET), 'llama.cpp arithmetic, by its own kernel');
});
