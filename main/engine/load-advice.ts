/**
 * What a person can do about a model that does not load: one sentence per kind of failure,
 * appended to every `ModelLoadError` and `TokenizerError` message, so the window's model card,
 * the CLI and the API all say the same thing. The table is the one rule: the first kind whose
 * pattern matches the engine's own message wins; a message that already says what to do (it
 * names a remedy after a semicolon) gets nothing more.
 */

/** [pattern on the error's message, what to do]. Order matters: specific kinds first. */
const ADVICE: ReadonlyArray<readonly [RegExp, string]> = [
  [/does not exist/, 'Check the path, or choose the model again: a llama2.c .bin, a .gguf file, a Hugging Face folder or a Ropewalk bundle.'],
  [/chat template/, "Fix the chat template in the model's tokenizer_config.json (or GGUF metadata), or remove it to chat without one."],
  [/which is not supported \(supported:/, 'Download this model in a supported quantization (Q4_K_M, Q5_K_M, Q6_K, Q8_0, Q4_0) or as F16/F32.'],
  [/truncated|damaged|past the end|shorter than|too short|size mismatch|read \d+ of|expected \d+ bytes|bytes, the loader gave|ends at byte/, 'The file is incomplete or damaged: download it again.'],
  [/unsupported model_type|architecture|rope_scaling|rope scaling/i, 'Ropewalk runs llama (Llama, Mistral, TinyLlama, SmolLM), qwen2, qwen3, qwen3moe (Qwen3-30B-A3B), gpt-oss, gemma2, gemma3 and phi3 models: choose one of these.'],
  [/^invalid config\.json|config\.json is not valid JSON/, "The model's config.json is incomplete or not of a supported model: download the model's files again."],
  [/tokeni[sz]er|token id|vocab/i, 'Put the tokenizer that came with this model beside it (tokenizer.json, or tok*.bin / tokenizer.bin for llama2.c), or download the model again.'],
  [/header|out of range|not valid JSON|not a JSON|not divisible|not a multiple|is odd|more than the/, 'The file is damaged or not a model of a supported kind: download it again, or choose another model.'],
  [/cannot write|cannot move|ENOSPC|EACCES|EPERM|EROFS|read-only/, "Free some disk space, or check that Ropewalk's data folder is writable."],
  [/ONNX Runtime cannot load/, 'Delete the imported copy in the model cache folder and open the original model again.'],
  [/cannot read|cannot open|cannot list/, 'Check that the file is readable (permissions, a disconnected drive) and choose it again.'],
];

/** Said when no kind matches. */
const FALLBACK = 'Choose a complete model in a supported format: a llama2.c .bin, a .gguf file, a Hugging Face folder or a Ropewalk bundle.';

const EVERY_ADVICE = [...ADVICE.map(([, a]) => a), FALLBACK];

/**
 * Messages that already say what to do ("…; lower the max context…", "…; export with --version
 * 0", "expected a …"), or that are not about loading at all: a token id asked of a loaded
 * tokenizer (the caller's input, which the caller names).
 */
const NO_ADVICE = /; (lower|set|use|export|choose|open|delete|free|check|download|put|fix)\b|^not a model: expected |^cannot decode token id/;

/**
 * The sentence to append to a load failure's message, or null when it already says what to do
 * or is not a load failure.
 * @param message the engine's message (one line, without advice).
 */
export function loadAdvice(message: string): string | null {
  if (NO_ADVICE.test(message)) return null;
  for (const [pattern, advice] of ADVICE) if (pattern.test(message)) return advice;
  return FALLBACK;
}

/**
 * `message (file). Advice.`: the advice is chosen from the message alone (a path may hold any
 * word); a message that wraps an advised one (e.g. "cannot read the model: …") keeps the inner advice.
 */
export function withLoadAdvice(message: string, file?: string): string {
  const located = file ? `${message} (${file})` : message;
  const advice = loadAdvice(message);
  if (advice === null || EVERY_ADVICE.some((a) => message.includes(a))) return located;
  return `${located.replace(/[.\s]+$/, '')}. ${advice}`;
}
