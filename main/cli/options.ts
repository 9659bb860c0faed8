/**
 * Command-line options of `npm run chat`: parsing and validation. Every bad value becomes a
 * `UsageError` whose message is one line; the CLI prints it and exits with code 2.
 */
import { parseArgs } from 'node:util';
// growth.ts, not engine.ts: the CLI's main thread must not load ONNX Runtime (the worker does).
import { MAX_CONTEXT_LIMIT } from '../engine/cache/growth.ts';
import { MAX_THREADS, type BackendKind, type ExecutionProviderChoice } from '../engine/model/backend.ts';
import { DEFAULT_KV_CACHE_DTYPE } from '../engine/model/graph-target.ts';
import { CONTEXT_FULL_POLICIES, EXECUTION_PROVIDER_PREFERENCES, KV_CACHE_DTYPES, QUANTIZE_OPTIONS, type ContextFullPolicy, type KvCacheDtype, type QuantizeOption } from '../contract/types.ts';
import type { SamplerOptions } from '../engine/sampling/sampler.ts';

/** A bad command line: the CLI prints its one-line message and exits with code 2. */
export class UsageError extends Error {}

export interface ChatOptions {
  model: string | null;
  prompt: string;
  maxTokens: number;
  maxContext: number | null;
  sampler: SamplerOptions;
  ignoreEos: boolean;
  /** auto (default): CUDA, else WebGPU on a GPU, else CPU, each step down said in a `note:` line. */
  ep: ExecutionProviderChoice;
  /** null: native when the addon loads, else js (the engine says why). */
  backend: BackendKind | null;
  /** ONNX Runtime's intra-op threads (0: the physical cores, main/engine/model/cpu-threads.ts). */
  threads: number;
  /** `--kv-cache float16|float32`: the KV cache's element type on the CPU (default the engine's). */
  kvCacheDtype: KvCacheDtype;
  /** Quantize a float model's Linear weights at import. */
  quantize: QuantizeOption | null;
  json: boolean;
  system: string | null;
  stop: string[];
  /** Files to attach, in order (`--attach`, repeatable). */
  attach: string[];
  /** `--fit relevant`: use the relevant parts of documents that do not fit. */
  fitRelevant: boolean;
  /** `--context-full rolling-window` (default): shift the context at the max context; `stop`: end there. */
  contextShift: boolean;
  /** `--think` / `--no-think`: `enable_thinking` for a template that reads it; null: the template's default. */
  thinking: boolean | null;
  /** `--json-schema FILE`: the answer is JSON matching the schema in FILE (constrained decoding). */
  jsonSchema: string | null;
}

/**
 * The contract's context-full policies a single prompt can use. Truncate the middle keeps a
 * conversation's first exchange; `npm run chat` answers one prompt, which has none to keep.
 */
const CLI_CONTEXT_FULL = CONTEXT_FULL_POLICIES.filter((p): p is Exclude<ContextFullPolicy, 'truncate-middle'> => p !== 'truncate-middle');

/** Defaults; the sampler's only affect sampling, so `--temperature 0` alone is pure greedy. */
export const DEFAULTS = { maxTokens: 256, temperature: 0.8, topK: 40, topP: 0.95, minP: 0.05, repeatPenalty: 1 } as const;

export const USAGE = `usage: npm run chat -- [options] "prompt"
  --model PATH          llama2.c checkpoint (tokenizer beside it), Hugging Face folder, GGUF file, or bundle
                        (default: the embedded stories260K)
  --max-tokens N        most tokens to generate (default ${DEFAULTS.maxTokens})
  --max-context N       bound on prompt + generated positions (default: the model's trained context)
  --temperature T       0 = greedy (default ${DEFAULTS.temperature})
  --top-k N             0 = off (default ${DEFAULTS.topK})
  --top-p P             1 = off, 0 = only the most likely token (default ${DEFAULTS.topP})
  --min-p P             0 = off (default ${DEFAULTS.minP})
  --repeat-penalty R    1 = off (default ${DEFAULTS.repeatPenalty})
  --seed N              seed for sampling (same seed, same output)
  --ignore-eos          keep generating past the end-of-sequence token
  --stop S              stop when the text reaches S (repeatable)
  --json-schema FILE    answer with JSON that matches the JSON Schema in FILE (constrained decoding)
  --system TEXT         system prompt (chat models only)
  --ep auto|cpu|webgpu|cuda
                        execution provider (default auto: CUDA, else WebGPU on a GPU, else CPU;
                        a provider that cannot be used falls back to CPU with a note)
  --backend native|js   decoder backend (default native: the C++ addon; js when it cannot load, with a message)
  --threads N           ONNX Runtime's intra-op threads for the CPU work (default 0: one per physical core)
  --kv-cache float32|float16
                        the KV cache's element type on the CPU (default ${DEFAULT_KV_CACHE_DTYPE}; float16: half the memory)
  --quantize q4|q8      import a float model's linear weights as 4- or 8-bit blocks (round to nearest)
  --attach FILE         attach a document (repeatable): text, Markdown, code, PDF, .docx, HTML,
                        PNG, JPEG (scanned pages and images by OCR)
  --fit relevant        when the documents do not fit, use their parts most relevant to the question
  --context-full P      at the max context: rolling-window (default: drop the oldest tokens after the
                        system prompt and go on, without a new prefill) or stop (finish reason context-full);
                        the window's truncate-middle needs a conversation (a first exchange to keep)
  --think, --no-think   let a reasoning model (Qwen3) think first, or not (default: the model's template);
                        its thinking goes to stderr, the answer to stdout
  --json                print one JSON object at the end instead of streaming text (reasoning apart in "reasoning")`;

function int(name: string, v: string | undefined, min: number, max = Number.MAX_SAFE_INTEGER): number | undefined {
  if (v === undefined) return undefined;
  if (!/^-?\d+$/.test(v.trim())) throw new UsageError(`--${name} must be an integer, got "${v}"`);
  const n = Number(v);
  if (n < min || n > max) throw new UsageError(`--${name} must be between ${min} and ${max}, got ${v.trim()}`);
  return n;
}

/** Plain decimal numbers only (Number() would also take "0x10", "1_0"-less forms, "Infinity"). */
const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i;

function num(name: string, v: string | undefined, ok: (n: number) => boolean, range: string): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!DECIMAL.test(v.trim()) || !Number.isFinite(n) || !ok(n)) throw new UsageError(`--${name} must be ${range}, got "${v}"`);
  return n;
}

/**
 * Parses argv (without node and script).
 * @throws UsageError with a one-line message for unknown options, bad values, a missing or empty prompt.
 */
export function parseChatOptions(argv: string[]): ChatOptions | 'help' {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        model: { type: 'string' },
        'max-tokens': { type: 'string' },
        'max-context': { type: 'string' },
        temperature: { type: 'string' },
        'top-k': { type: 'string' },
        'top-p': { type: 'string' },
        'min-p': { type: 'string' },
        'repeat-penalty': { type: 'string' },
        seed: { type: 'string' },
        'ignore-eos': { type: 'boolean' },
        stop: { type: 'string', multiple: true },
        'json-schema': { type: 'string' },
        system: { type: 'string' },
        ep: { type: 'string' },
        backend: { type: 'string' },
        threads: { type: 'string' },
        'kv-cache': { type: 'string' },
        quantize: { type: 'string' },
        json: { type: 'boolean' },
        attach: { type: 'string', multiple: true },
        fit: { type: 'string' },
        'context-full': { type: 'string' },
        think: { type: 'boolean' },
        'no-think': { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (e) {
    // Node's message can span lines (e.g. a negative value needs --temperature=-1): keep one line.
    throw new UsageError((e as Error).message.split('\n').map((l) => l.trim()).filter(Boolean).join(' '));
  }
  const v = parsed.values;
  if (v.help) return 'help';
  if (parsed.positionals.length === 0) throw new UsageError('a prompt is required, e.g. npm run chat -- "Once upon a time"');
  if (parsed.positionals.length > 1) throw new UsageError(`expected one prompt, got ${parsed.positionals.length} arguments (quote the prompt)`);
  const prompt = parsed.positionals[0];
  if (prompt.trim().length === 0) throw new UsageError('the prompt is empty: give some text, e.g. npm run chat -- "Once upon a time"');
  const ep = EXECUTION_PROVIDER_PREFERENCES.find((p) => p === (v.ep ?? 'auto'));
  if (ep === undefined) throw new UsageError(`--ep must be ${EXECUTION_PROVIDER_PREFERENCES.join(', ')}, got "${v.ep}"`);
  const backend = v.backend ?? null;
  if (backend !== null && backend !== 'native' && backend !== 'js') throw new UsageError(`--backend must be native or js, got "${backend}"`);
  if (v.model !== undefined && v.model.trim() === '') throw new UsageError('--model needs a path');
  const quantize = v.quantize === undefined ? null : QUANTIZE_OPTIONS.find((q) => q === v.quantize);
  if (quantize === undefined) throw new UsageError(`--quantize must be ${QUANTIZE_OPTIONS.join(' or ')}, got "${v.quantize}"`);
  const kvCacheDtype = KV_CACHE_DTYPES.find((d) => d === (v['kv-cache'] ?? DEFAULT_KV_CACHE_DTYPE));
  if (kvCacheDtype === undefined) throw new UsageError(`--kv-cache must be ${KV_CACHE_DTYPES.join(' or ')}, got "${v['kv-cache']}"`);
  const seed = int('seed', v.seed, 0, 2 ** 32 - 1);
  if (v.fit !== undefined && v.fit !== 'relevant') throw new UsageError(`--fit must be relevant, got "${v.fit}"`);
  if (v.fit !== undefined && !v.attach?.length) throw new UsageError('--fit relevant needs a document (--attach FILE)');
  for (const f of v.attach ?? []) if (f.trim() === '') throw new UsageError('--attach needs a file path');
  if (v['json-schema'] !== undefined && v['json-schema'].trim() === '') throw new UsageError('--json-schema needs a file path');
  const contextFull = v['context-full'] ?? 'rolling-window';
  if (contextFull === 'truncate-middle') {
    throw new UsageError(
      '--context-full truncate-middle keeps the first exchange of a conversation and drops the turns after it, but npm run chat answers a single prompt: there is no first exchange to keep; use rolling-window or stop',
    );
  }
  if (v.think && v['no-think']) throw new UsageError('give one of --think and --no-think');
  if (v['json-schema'] !== undefined && (v.stop?.length ?? 0) > 0) throw new UsageError('--stop cannot be combined with --json-schema: a stop string would cut the JSON short');
  if (!CLI_CONTEXT_FULL.some((p) => p === contextFull)) throw new UsageError(`--context-full must be ${CLI_CONTEXT_FULL.join(' or ')}, got "${contextFull}"`);
  return {
    model: v.model ?? null,
    prompt,
    maxTokens: int('max-tokens', v['max-tokens'], 1, 1 << 20) ?? DEFAULTS.maxTokens,
    maxContext: int('max-context', v['max-context'], 1, MAX_CONTEXT_LIMIT) ?? null,
    sampler: {
      temperature: num('temperature', v.temperature, (n) => n >= 0 && n <= 100, 'a number between 0 and 100') ?? DEFAULTS.temperature,
      topK: int('top-k', v['top-k'], 0) ?? DEFAULTS.topK,
      topP: num('top-p', v['top-p'], (n) => n >= 0 && n <= 1, 'in [0, 1]') ?? DEFAULTS.topP,
      minP: num('min-p', v['min-p'], (n) => n >= 0 && n < 1, 'in [0, 1)') ?? DEFAULTS.minP,
      repetitionPenalty: num('repeat-penalty', v['repeat-penalty'], (n) => n > 0 && n <= 10, 'in (0, 10]') ?? DEFAULTS.repeatPenalty,
      ...(seed !== undefined ? { seed } : {}),
    },
    ignoreEos: v['ignore-eos'] ?? false,
    ep,
    backend,
    threads: int('threads', v.threads, 0, MAX_THREADS) ?? 0,
    kvCacheDtype,
    quantize,
    json: v.json ?? false,
    system: v.system ?? null,
    stop: v.stop ?? [],
    attach: v.attach ?? [],
    fitRelevant: v.fit === 'relevant',
    contextShift: contextFull === 'rolling-window',
    thinking: v.think ? true : v['no-think'] ? false : null,
    jsonSchema: v['json-schema'] ?? null,
  };
}
