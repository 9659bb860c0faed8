/**
 * A trie over the vocabulary's token bytes, flat in typed arrays, and the walk that turns a
 * grammar state into a token mask. Built once per tokenizer (`TokenTrie.of` caches it on the
 * token-bytes array) in O(total token bytes · log V) (a sort, then one pass).
 *
 * The walk (`allowed`) visits a trie node only while the grammar still accepts the bytes on the
 * path to it, so tokens sharing a dead prefix are skipped together: a step costs the live trie
 * nodes, not V × token length (measured in test/bench/constrained.ts).
 */

/** A grammar the trie can walk: states advance byte by byte; an empty result is a dead end. */
export interface ByteGrammar<S> {
  advance(state: S, byte: number): S | null;
}

export class TokenTrie {
  /** Per node: the byte on the edge into it, its first child, its next sibling (−1: none). */
  private readonly byte: Uint8Array;
  private readonly firstChild: Int32Array;
  private readonly nextSibling: Int32Array;
  /** Per node: the first token id ending here (−1: none); more through `nextToken`. */
  private readonly firstToken: Int32Array;
  private readonly nextToken: Int32Array;
  /** Trie nodes (the root is node 0). */
  readonly size: number;

  private static readonly cache = new WeakMap<readonly (Uint8Array | null)[], TokenTrie>();

  /** The trie of `tokenBytes` (null entries left out), built once per array. */
  static of(tokenBytes: readonly (Uint8Array | null)[]): TokenTrie {
    let t = TokenTrie.cache.get(tokenBytes);
    if (!t) TokenTrie.cache.set(tokenBytes, (t = new TokenTrie(tokenBytes)));
    return t;
  }

  private constructor(tokenBytes: readonly (Uint8Array | null)[]) {
    // Token bytes as latin1 strings (one code unit per byte): byte order is their native sort order.
    const ids: number[] = [];
    const texts: string[] = [];
    let total = 1;
    tokenBytes.forEach((b, id) => {
      if (!b || b.length === 0) return;
      ids.push(id);
      texts.push(String.fromCharCode.apply(null, b as unknown as number[]));
      total += b.length;
    });
    const order = ids.map((_, i) => i).sort((a, b) => (texts[a] < texts[b] ? -1 : texts[a] > texts[b] ? 1 : 0));
    this.byte = new Uint8Array(total);
    this.firstChild = new Int32Array(total).fill(-1);
    this.nextSibling = new Int32Array(total).fill(-1);
    this.firstToken = new Int32Array(total).fill(-1);
    this.nextToken = new Int32Array(tokenBytes.length).fill(-1);
    const lastChild = new Int32Array(total).fill(-1);
    // Sorted order: a token shares with the previous one the path up to their common prefix.
    const path = new Int32Array(total);
    let prev = '';
    let n = 1;
    for (const i of order) {
      const text = texts[i];
      let common = 0;
      while (common < prev.length && common < text.length && prev.charCodeAt(common) === text.charCodeAt(common)) common++;
      for (let d = common; d < text.length; d++) {
        const parent = path[d];
        const node = n++;
        this.byte[node] = text.charCodeAt(d);
        if (lastChild[parent] < 0) this.firstChild[parent] = node;
        else this.nextSibling[lastChild[parent]] = node;
        lastChild[parent] = node;
        path[d + 1] = node;
      }
      const end = path[text.length];
      this.nextToken[ids[i]] = this.firstToken[end];
      this.firstToken[end] = ids[i];
      prev = text;
    }
    this.size = n;
  }

  /**
   * Marks in `mask` (1 = allowed; the caller zeroes it first) every token whose bytes the grammar
   * accepts whole from `state`. @returns [tokens allowed, trie nodes visited].
   */
  allowed<S>(grammar: ByteGrammar<S>, state: S, mask: Uint8Array): [number, number] {
    let allowed = 0;
    let visited = 0;
    const walk = (node: number, s: S): void => {
      for (let c = this.firstChild[node]; c >= 0; c = this.nextSibling[c]) {
        visited++;
        const next = grammar.advance(s, this.byte[c]);
        if (next === null) continue;
        for (let id = this.firstToken[c]; id >= 0; id = this.nextToken[id]) {
          mask[id] = 1;
          allowed++;
        }
        walk(c, next);
      }
    };
    walk(0, state);
    return [allowed, visited];
  }
}
