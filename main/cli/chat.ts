/**
 * `npm run chat -- [options] "prompt"`: streams a completion from the engine (in its worker
 * thread, through the engine host) to stdout, or prints one JSON object with `--json`.
 * Exit codes: 0 done, 1 model or runtime failure, 2 bad usage (bad option, empty prompt, prompt
 * longer than the max context, a document that cannot be read or does not fit), 130 stopped
 * with Ctrl-C (the partial answer is printed; during a first import, the import stops and leaves
 * nothing in the model cache). Errors are one line on stderr; no stack trace reaches the user.
 * Import progress goes to stderr on a terminal only. With `--attach`, the documents go into the
 * user turn before the question (main/cli/documents.ts); the parts used with `--fit relevant`
 * are listed on stderr. In text mode an answer that shifted the context, or that ended at the max
 * context, gets one `note:` line on stderr in the window's words (main/contract/context-full.ts);
 * `--json` carries the same in `finishReason` and `stats`. A reasoning model's thinking goes to
 * stderr, framed as Ollama's CLI does ("Thinking..." … "...done thinking.", dimmed on a terminal:
 * thinking.ts), so stdout is the answer alone; `--json` has it in `reasoning` (`text`: the answer).
 * `--think` / `--no-think` pass `enable_thinking` to a template that reads it (Qwen3).
 */
import { maxContextCaution } from '../contract/context-caution.ts';
import { CLI_CONTEXT_REMEDIES, contextFullNote, contextShiftNote, promptTooLongRemedy } from '../contract/context-full.ts';
import { defaultModelPath } from '../common/default-model.ts';
import { readFileSync } from 'node:fs';
import { EngineHost } from '../engine-host/host.ts';
import { EngineError, InvalidOptionError } from '../engine/errors.ts';
import { compileSchema } from '../engine/sampling/json-schema.ts';
import type { GenerationEvent, GenerationRequest, ResponseFormat } from '../engine/generate/types.ts';
import { DocumentError } from '../documents/errors.ts';
import { parseChatOptions, USAGE, UsageError } from './options.ts';
import { formatLoadProgress } from './progress.ts';
import { ThinkingPrinter } from './thinking.ts';

const USAGE_CODES = new Set(['INVALID_OPTION', 'CONTEXT_OVERFLOW']);

async function main(argv: string[]): Promise<number> {
  const opts = parseChatOptions(argv);
  if (opts === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const ac = new AbortController();
  process.once('SIGINT', () => ac.abort());
  // Documents first: a file that cannot be used fails before the model loads. Loaded only when
  // asked for, so a plain chat starts without the PDF, .docx and HTML parsers.
  const documents = opts.attach.length ? await import('./documents.ts') : null;
  // OCR takes seconds a page: on a terminal, one line redrawn while a file is read by OCR.
  let ocrLine = false;
  const ocrProgress = (name: string, fraction: number, phase?: 'ocr') => {
    if (phase !== 'ocr' || process.stderr.isTTY !== true) return;
    process.stderr.write(`\r\x1b[2K${name}: reading by OCR… ${Math.round(fraction * 100)} %`);
    ocrLine = true;
  };
  const docs = documents
    ? await documents.readAttachments(opts.attach, ac.signal, ocrProgress).finally(() => {
        if (ocrLine) process.stderr.write('\n');
      })
    : [];
  // Pages read by OCR and pages without text: said on stderr in every mode (--json has them too).
  for (const d of docs) for (const note of documents!.pageNotes(d)) process.stderr.write(`note: ${note}\n`);
  const responseFormat = opts.jsonSchema ? readJsonSchema(opts.jsonSchema) : null;
  const host = new EngineHost();
  try {
    // Import progress on a terminal only (one line, redrawn); pipes and tests see none.
    const tty = process.stderr.isTTY === true;
    let drawn = false;
    const info = await host.load(
      opts.model ?? defaultModelPath(),
      {
        ...(opts.maxContext !== null ? { maxContext: opts.maxContext } : {}),
        executionProvider: opts.ep,
        ...(opts.backend !== null ? { backend: opts.backend } : {}),
        ...(opts.threads > 0 ? { threads: opts.threads } : {}),
        kvCacheDtype: opts.kvCacheDtype,
        ...(opts.quantize ? { quantize: opts.quantize } : {}),
      },
      (phase, fraction, detail) => {
        if (!tty || phase === 'cached') return;
        process.stderr.write(`\r\x1b[2K${formatLoadProgress(phase, fraction, detail)}`);
        drawn = true;
      },
      ac.signal,
    ).finally(() => {
      if (drawn) process.stderr.write('\n');
    });
    if (info.fallbackReason) process.stderr.write(`note: ${info.fallbackReason}\n`);
    // Allowed, as in the window, with the same caution (one rule: main/contract/context-caution.ts).
    const caution = maxContextCaution(info.maxContext, info.trainedContext);
    if (caution) process.stderr.write(`note: ${caution}\n`);
    // Without a chat template the system prompt opens the transcript, as in the window and /v1.
    const system = opts.system ? [{ role: 'system' as const, content: opts.system }] : [];
    const withDocs = documents
      ? await documents.documentPrompt(host, system, opts.prompt, docs, { relevant: opts.fitRelevant, room: info.maxContext - opts.maxTokens, maxContext: info.maxContext, trainedContext: info.trainedContext, reserve: opts.maxTokens })
      : null;
    if (withDocs?.documentParts && !opts.json) process.stderr.write(`using the relevant parts: ${withDocs.documentParts.join('; ')}\n`);
    const request: GenerationRequest = {
      maxTokens: opts.maxTokens,
      sampler: opts.sampler,
      ignoreEos: opts.ignoreEos,
      stop: opts.stop,
      contextShift: opts.contextShift,
      ...(opts.thinking !== null ? { enableThinking: opts.thinking } : {}),
      ...(responseFormat ? { responseFormat } : {}),
      ...(withDocs
        ? { messages: withDocs.messages }
        : info.hasChatTemplate || system.length
          ? { messages: [...system, { role: 'user' as const, content: opts.prompt }] }
          : { prompt: opts.prompt }),
    };
    let done: Extract<GenerationEvent, { type: 'done' }> | null = null;
    // A completion continues the prompt, so it is echoed first, but only once the engine has
    // accepted it: a usage error (prompt longer than the max context) leaves stdout empty.
    let echo = !opts.json && !info.hasChatTemplate && !withDocs && !system.length;
    const thinking = new ThinkingPrinter((t) => process.stderr.write(t), process.stderr.isTTY === true);
    try {
      for await (const ev of host.generate(request, { signal: ac.signal })) {
        if (echo) {
          process.stdout.write(opts.prompt);
          echo = false;
        }
        if (ev.type === 'token' && !opts.json && !thinking.take(ev.part, ev.text)) process.stdout.write(ev.text);
        if (ev.type === 'done') done = ev;
      }
      thinking.end();
    } catch (e) {
      // The engine says what did not fit; the terminal says what to do, knowing the model's trained context.
      if (e instanceof EngineError && e.code === 'CONTEXT_OVERFLOW') {
        throw new UsageError(`${e.message}; ${promptTooLongRemedy(info.maxContext, info.trainedContext, CLI_CONTEXT_REMEDIES)}`);
      }
      throw e;
    }
    if (!done) throw new EngineError('SESSION_RUN', 'generation ended without a result');
    if (opts.json) {
      process.stdout.write(
        `${JSON.stringify({
          text: done.text,
          reasoning: done.reasoning,
          promptTokens: done.promptTokens,
          tokens: done.tokens,
          finishReason: done.reason,
          stats: done.stats,
          model: { name: info.name, weights: info.weights, kvCacheDtype: info.kvCacheDtype },
          ...(withDocs ? { documents: withDocs.documents } : {}),
          ...(withDocs?.documentParts ? { documentParts: withDocs.documentParts } : {}),
          ...(withDocs ? { passages: withDocs.passages } : {}),
        })}\n`,
      );
    } else {
      process.stdout.write('\n');
      // The window's words for it too (main/contract/context-full.ts).
      const shifted = contextShiftNote({ shifts: done.stats.contextShifts, droppedTokens: done.stats.droppedTokens });
      if (shifted) process.stderr.write(`note: ${shifted}\n`);
      const full = contextFullNote(
        { reason: done.reason, shifting: opts.contextShift, maxContext: info.maxContext, trainedContext: info.trainedContext },
        CLI_CONTEXT_REMEDIES,
      );
      if (full) process.stderr.write(`note: ${full}\n`);
    }
    if (done.reason === 'error') {
      process.stderr.write(`error: ${done.error?.message ?? 'generation failed'}\n`);
      return 1;
    }
    // Ctrl-C: the partial answer was printed; the shell's convention for SIGINT is 128 + 2.
    return done.reason === 'cancelled' ? 130 : 0;
  } finally {
    await host.dispose();
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    if (e instanceof UsageError || e instanceof DocumentError) {
      process.stderr.write(`error: ${e.message}\n`);
      process.exitCode = 2;
    } else if (e instanceof EngineError) {
      // (A CONTEXT_OVERFLOW comes only from generate, where main turns it into a UsageError with its remedy.)
      process.stderr.write(`error: ${e.message}\n`);
      // Ctrl-C during an import: the shell's convention for SIGINT, as for a cancelled answer.
      process.exitCode = e.code === 'CANCELLED' ? 130 : USAGE_CODES.has(e.code) ? 2 : 1;
    } else {
      process.stderr.write(`error: ${e instanceof Error ? e.message.split('\n')[0] : String(e)}\n`);
      process.exitCode = 1;
    }
  },
);

/**
 * `--json-schema FILE` as a response format: the file's JSON Schema, compiled once here so a
 * keyword constrained decoding does not cover is a usage error before the model loads.
 * @throws UsageError when the file cannot be read, is not JSON, or uses a keyword not covered.
 */
function readJsonSchema(file: string): ResponseFormat {
  let schema: unknown;
  try {
    schema = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new UsageError(`--json-schema ${file}: ${(e as Error).message.split('\n')[0]}`);
  }
  try {
    compileSchema(schema);
  } catch (e) {
    if (e instanceof InvalidOptionError) throw new UsageError(`--json-schema ${file}: ${e.message.replace(/^invalid response_format: /, '')}`);
    throw e;
  }
  return { type: 'json_schema', schema };
}
