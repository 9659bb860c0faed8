/**
 * Constrained decoding of one tool call written as `name<separator>{arguments}` (Mistral's newer
 * format, `[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"}`; the `[TOOL_CALLS]` is the prompt's):
 * a name that is not JSON, so json-constraint.ts alone cannot hold it. Two stages:
 *   1. the name: only tokens whose bytes keep the text a prefix of one of the tools' names (a
 *      trie walk, token-trie.ts); once it is a whole name, the separator token too (a special
 *      token in Mistral's vocabularies; where the vocabulary lacks it, its text is spelled out
 *      as part of the name);
 *   2. the arguments: that tool's parameters schema, by a JsonConstraint, which ends the call.
 * Same contract as JsonConstraint (`mask(V)`, `accept(id)`, `mustEnd`); nothing runs without it.
 * @throws EngineError('SESSION_RUN') for a token outside the mask.
 */
import { EngineError } from '../errors.ts';
import { JsonConstraint, type TokenConstraint } from './json-constraint.ts';
import type { SchemaNode } from './json-schema.ts';
import { TokenTrie, type ByteGrammar } from './token-trie.ts';

/** A tool the call may name, with its compiled parameters schema. */
export interface ToolChoiceNode {
  name: string;
  node: SchemaNode;
}

const latin1 = (text: string): string => String.fromCharCode(...new TextEncoder().encode(text));

export class ToolCallConstraint implements TokenConstraint {
  /** The name so far, as latin1 (one code unit per byte). */
  private prefix = '';
  private args: JsonConstraint | null = null;
  /** Per tool: what stage 1 must write (its name's bytes, plus the separator's when it is not a token). */
  private readonly literals: string[];
  private readonly trie: TokenTrie;
  private readonly grammar: ByteGrammar<string>;

  /**
   * @param tools the tools the call may name (≥ 1).
   * @param separator the text between name and arguments (`[ARGS]`), and its token id (null:
   *   the vocabulary has no such token; its bytes are written instead).
   */
  constructor(
    private readonly tools: readonly ToolChoiceNode[],
    private readonly separator: { text: string; id: number | null },
    private readonly tokenBytes: readonly (Uint8Array | null)[],
    private readonly eos: readonly number[],
  ) {
    const tail = separator.id === null ? latin1(separator.text) : '';
    this.literals = tools.map((t) => latin1(t.name) + tail);
    this.trie = TokenTrie.of(tokenBytes);
    this.grammar = {
      advance: (s, byte) => {
        const next = s + String.fromCharCode(byte);
        return this.literals.some((l) => l.startsWith(next)) ? next : null;
      },
    };
  }

  get mustEnd(): boolean {
    return this.args?.mustEnd ?? false;
  }

  /** [V] 0/1: stage 1's name tokens (and the separator after a whole name), then the arguments' mask. */
  mask(V: number): Uint8Array {
    if (this.args) return this.args.mask(V);
    const mask = new Uint8Array(V);
    let [allowed] = this.trie.allowed(this.grammar, this.prefix, mask);
    const sep = this.separator.id;
    if (sep !== null && sep < V && this.literals.includes(this.prefix)) [mask[sep], allowed] = [1, allowed + 1];
    if (allowed === 0) throw new EngineError('SESSION_RUN', 'constrained decoding: no token of this vocabulary can continue the tool call here');
    return mask;
  }

  /** Moves past token `id`. @throws EngineError('SESSION_RUN') when it cannot continue the call. */
  accept(id: number): void {
    if (this.args) return this.args.accept(id);
    if (id === this.separator.id && this.literals.includes(this.prefix)) return this.begin(this.literals.indexOf(this.prefix));
    const bytes = this.tokenBytes[id];
    const next = bytes && !this.eos.includes(id) ? this.prefix + String.fromCharCode(...bytes) : null;
    if (next === null || !this.literals.some((l) => l.startsWith(next))) throw new EngineError('SESSION_RUN', `constrained decoding: token ${id} cannot continue the tool call's name here`);
    this.prefix = next;
    if (this.separator.id === null && this.literals.includes(next)) this.begin(this.literals.indexOf(next));
  }

  private begin(tool: number): void {
    this.args = new JsonConstraint(this.tools[tool].node, this.tokenBytes, this.eos);
  }
}
