/** Test helper: seeded damage to any file's bytes (bit flips, a truncation, a range duplicated or deleted). */

/** A damaged copy of `b`, one of four kinds chosen by `r`. */
export function mutateBytes(b: Buffer, r: () => number): Buffer {
  const int = (n: number) => Math.floor(r() * n);
  const c = Buffer.from(b);
  switch (int(4)) {
    case 0:
      for (let i = 0; i < 1 + int(16); i++) c[int(c.length)] ^= 1 << int(8);
      return c;
    case 1:
      return c.subarray(0, int(c.length));
    case 2: {
      const [a, n] = [int(c.length), 1 + int(512)];
      return Buffer.concat([c.subarray(0, a + n), c.subarray(a, a + n), c.subarray(a + n)]);
    }
    default: {
      const [a, n] = [int(c.length), 1 + int(512)];
      return Buffer.concat([c.subarray(0, a), c.subarray(a + n)]);
    }
  }
}
