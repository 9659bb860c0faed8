/**
 * Counts the binary buffers code allocates while it runs: every `new ArrayBuffer`, typed array and
 * `Buffer.alloc*` made through the globals during `fn` is recorded with its size in bytes, so a test can
 * say "rejected without allocating the weights" as a number instead of as a time. The globals are
 * wrapped in Proxies (construct traps; `instanceof` and the static methods still work) and restored
 * in `finally`. Allocations inside native code, or through references captured before `fn`, are not seen.
 */

type Ctor = { new (...args: never[]): unknown; BYTES_PER_ELEMENT?: number };

const TYPED = ['Int8Array', 'Uint8Array', 'Uint8ClampedArray', 'Int16Array', 'Uint16Array', 'Int32Array', 'Uint32Array', 'Float32Array', 'Float64Array', 'BigInt64Array', 'BigUint64Array'] as const;

/** Bytes a constructor call allocates: a length (number) or an array-like's length, times the element size; a view over an existing buffer allocates nothing. */
function requestedBytes(args: unknown[], bytesPerElement: number): number {
  const [a] = args;
  if (typeof a === 'number') return a * bytesPerElement;
  if (a instanceof ArrayBuffer || (typeof SharedArrayBuffer !== 'undefined' && a instanceof SharedArrayBuffer)) return 0;
  if (a && typeof a === 'object' && 'length' in a && typeof (a as { length: unknown }).length === 'number') return (a as { length: number }).length * bytesPerElement;
  return 0;
}

/**
 * Runs `fn` and returns its result with the largest single allocation (bytes) and the total (bytes).
 * @throws whatever `fn` throws, after restoring the globals (the counts are then lost: use
 *   `assert.rejects` inside `fn`).
 */
export async function countAllocations<T>(fn: () => Promise<T>): Promise<{ result: T; largestBytes: number; totalBytes: number }> {
  const g = globalThis as unknown as Record<string, unknown>;
  let largestBytes = 0;
  let totalBytes = 0;
  const record = (n: number) => {
    largestBytes = Math.max(largestBytes, n);
    totalBytes += n;
  };
  const saved = new Map<string, unknown>();
  const wrap = (name: string, bpe: number) => {
    const original = g[name] as Ctor;
    saved.set(name, original);
    g[name] = new Proxy(original, {
      construct(target, args, newTarget) {
        record(requestedBytes(args, bpe));
        return Reflect.construct(target, args, newTarget === g[name] ? target : newTarget);
      },
    });
  };
  wrap('ArrayBuffer', 1);
  for (const name of TYPED) wrap(name, (g[name] as Ctor).BYTES_PER_ELEMENT ?? 1);
  const { alloc, allocUnsafe, allocUnsafeSlow } = Buffer;
  Buffer.alloc = ((size: number, ...rest: never[]) => (record(size), alloc(size, ...rest))) as typeof Buffer.alloc;
  Buffer.allocUnsafe = ((size: number) => (record(size), allocUnsafe(size))) as typeof Buffer.allocUnsafe;
  Buffer.allocUnsafeSlow = ((size: number) => (record(size), allocUnsafeSlow(size))) as typeof Buffer.allocUnsafeSlow;
  try {
    const result = await fn();
    return { result, largestBytes, totalBytes };
  } finally {
    for (const [name, original] of saved) g[name] = original;
    Object.assign(Buffer, { alloc, allocUnsafe, allocUnsafeSlow });
  }
}
