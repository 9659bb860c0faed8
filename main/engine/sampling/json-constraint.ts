/**
 * Constrained decoding to JSON (response_format): one generation's grammar state and, per step,
 * the mask of the token ids that may come next. Contract:
 *   - `mask(V)` → Uint8Array [V] (1 = allowed): tokens whose bytes the grammar accepts whole
 *     from the current state (trie walk, token-trie.ts), plus the EOS ids once the value is
 *     whole; ids without text (special tokens, embedding padding) never. Masks are cached by
 *     grammar state (least recently used out past MASK_CACHE), so a state met again (the next
 *     item of an array, free string content) costs a lookup;
 *   - `accept(id)` moves the state by the token's bytes; `mustEnd` says the value is complete
 *     and nothing can follow (the generation ends there: EOS forced);
 *   - the sampler applies the mask (sampler.ts); without a constraint none of this runs.
 * @throws EngineError('SESSION_RUN') when a token outside the mask is accepted or the grammar
 *   leaves no token of this vocabulary (cannot happen for the schemas json-schema.ts compiles
 *   and a vocabulary with every byte, but said clearly rather than sampled wrong).
 */
import { EngineError } from '../errors.ts';
import { advance, canEnd, initialState, mustEnd, stateKey, stringContent, utf8Step, type MachineState } from './json-machine.ts';
import type { SchemaNode } from './json-schema.ts';
import { TokenTrie, type ByteGrammar } from './token-trie.ts';

/** Masks kept per generation (each V bytes). */
const MASK_CACHE = 64;

const GRAMMAR: ByteGrammar<MachineState> = {
  advance(state, byte) {
    const next = advance(state, byte);
    return next.length > 0 ? next : null;
  },
};

/** Counters for tests and the bench. */
export interface ConstraintStats {
  masks: number;
  cacheHits: number;
  /** Trie nodes visited by the masks computed (not the cached ones). */
  nodesVisited: number;
  maskMs: number;
}

/** What the generation loop asks of a constraint (JsonConstraint, tool-constraint.ts's ToolCallConstraint). */
export interface TokenConstraint {
  /** [V] 0/1, the ids allowed next (possibly a cached array: read it, do not keep or change it). */
  mask(V: number): Uint8Array;
  /** Moves past token `id`; throws EngineError('SESSION_RUN') for one the mask did not allow. */
  accept(id: number): void;
  /** The output is complete and nothing can follow (the generation ends there). */
  readonly mustEnd: boolean;
}

export class JsonConstraint implements TokenConstraint {
  private state: MachineState;
  private readonly trie: TokenTrie;
  private readonly cache = new Map<string, Uint8Array>();
  readonly stats: ConstraintStats = { masks: 0, cacheHits: 0, nodesVisited: 0, maskMs: 0 };

  /**
   * @param node the compiled schema (compileSchema, or JSON_OBJECT).
   * @param tokenBytes bytes per token id (TextTokenizer.tokenBytes; null = no text).
   * @param eos the ids that end generation.
   */
  constructor(
    node: SchemaNode,
    private readonly tokenBytes: readonly (Uint8Array | null)[],
    private readonly eos: readonly number[],
  ) {
    this.state = initialState(node);
    this.trie = TokenTrie.of(tokenBytes);
  }

  /** The value is complete and no byte can follow. */
  get mustEnd(): boolean {
    return mustEnd(this.state);
  }

  /**
   * The ids allowed next, as [V] 0/1 (V = the logits' length, ≥ the tokenizer's vocab).
   * The array may be a cached one: read it, do not keep or change it.
   */
  mask(V: number): Uint8Array {
    const key = stateKey(this.state);
    const hit = this.cache.get(key);
    if (hit && hit.length === V) {
      this.cache.delete(key); // refresh its place: least recently used goes first
      this.cache.set(key, hit);
      this.stats.cacheHits++;
      return hit;
    }
    const t0 = performance.now();
    const mask = new Uint8Array(V);
    const inString = stringContent(this.state);
    let [allowed, visited] = inString ? this.stringMask(inString, mask) : this.trie.allowed(GRAMMAR, this.state, mask);
    if (canEnd(this.state)) for (const id of this.eos) if (id < V && !mask[id]) [mask[id], allowed] = [1, allowed + 1];
    if (allowed === 0) throw new EngineError('SESSION_RUN', 'constrained decoding: no token of this vocabulary can continue the JSON here');
    this.stats.masks++;
    this.stats.nodesVisited += visited;
    this.stats.maskMs += performance.now() - t0;
    this.cache.set(key, mask);
    if (this.cache.size > MASK_CACHE) this.cache.delete(this.cache.keys().next().value!);
    return mask;
  }

  /**
   * String content's fast path: a plain token (no quote, backslash or control byte) is allowed
   * when its characters fit maxLength; only the tokens with a quote or backslash are walked
   * through the grammar. Same mask as the trie walk, at O(V) plus those tokens' bytes.
   */
  private stringMask(at: { len: number; maxLength: number }, mask: Uint8Array): [number, number] {
    const { plain, chars, special } = stringTokens(this.tokenBytes);
    const room = at.maxLength - at.len;
    let allowed = 0;
    for (let id = 0; id < plain.length; id++) {
      if (plain[id] && chars[id] <= room) {
        mask[id] = 1;
        allowed++;
      }
    }
    let visited = 0;
    for (const id of special) {
      let state = this.state;
      for (const b of this.tokenBytes[id]!) {
        visited++;
        if ((state = advance(state, b)).length === 0) break;
      }
      if (state.length > 0) [mask[id], allowed] = [1, allowed + 1];
    }
    return [allowed, visited];
  }

  /**
   * Moves past token `id` (an EOS id changes nothing).
   * @throws EngineError('SESSION_RUN') when the grammar does not accept the token's bytes.
   */
  accept(id: number): void {
    if (this.eos.includes(id)) return;
    const bytes = this.tokenBytes[id];
    let state = this.state;
    for (const b of bytes ?? []) {
      state = advance(state, b);
      if (state.length === 0) break;
    }
    if (!bytes || state.length === 0) throw new EngineError('SESSION_RUN', `constrained decoding: token ${id} cannot continue the JSON here`);
    this.state = state;
  }
}

/** Per token: plain string content from a character boundary (0/1) and the characters it starts; the ids whose first non-plain byte is a quote or backslash. */
interface StringTokens {
  plain: Uint8Array;
  chars: Uint16Array;
  special: Int32Array;
}

const stringTokenCache = new WeakMap<readonly (Uint8Array | null)[], StringTokens>();

function stringTokens(tokenBytes: readonly (Uint8Array | null)[]): StringTokens {
  let t = stringTokenCache.get(tokenBytes);
  if (t) return t;
  const plain = new Uint8Array(tokenBytes.length);
  const chars = new Uint16Array(tokenBytes.length);
  const special: number[] = [];
  tokenBytes.forEach((bytes, id) => {
    if (!bytes || bytes.length === 0) return;
    let u8 = 0;
    let n = 0;
    for (const b of bytes) {
      const next = b === 0x22 || b === 0x5c || b < 0x20 ? -1 : utf8Step(u8, b);
      if (next < 0) {
        // Anything else that is not plain is refused inside a string; a quote or backslash may close or escape.
        if (u8 === 0 && (b === 0x22 || b === 0x5c)) special.push(id);
        return;
      }
      if (u8 === 0) n++;
      u8 = next;
    }
    plain[id] = 1;
    chars[id] = Math.min(n, 0xffff);
  });
  stringTokenCache.set(tokenBytes, (t = { plain, chars, special: Int32Array.from(special) }));
  return t;
}
