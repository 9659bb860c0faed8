/**
 * A conversation as a file: export to Markdown (for reading) or JSON (for keeping; it imports
 * back), with the settings it was answered under and each answer's stats; and the JSON read back
 * for import. The JSON format is `{ format: "ropewalk.conversation", version: 1, title, createdAt,
 * exportedAt, model, settings, messages: [{ role, content, reasoning?, attachments?, status, stats, error, createdAt }] }`
 * (`reasoning`: an answer's thinking, apart from its content; `attachments`: the documents a
 * message carries, `[{ name, kind, hash, text }]`, each under the name it was attached with).
 * Markdown shows the thinking as a quoted block before the answer ("> **Thinking** …") and names
 * a message's documents under it ("_Attached: notes.md (markdown), rope.pdf (pdf)_").
 * Import reads the messages back with their documents' text (a document exported without text,
 * or of an unknown kind, is left out; page labels do not travel, so citations of pages do not link).
 * Each answer is stamped with what wrote it, as its stats recorded it (`stats.model`,
 * `stats.settings`; an answer saved before they were kept has none): the file's top-level
 * `model` and `settings` (Markdown: "settings at export") are the ones in use when exporting,
 * which another model's answers did not run under.
 * Pure: strings in, strings out; `ConversationFileError` quotes what is wrong with a file.
 */
import { DOCUMENT_KINDS, type AnswerSettings, type AnswerStats, type Conversation, type DocumentInfo, type DocumentKind, type ExportedAttachment, type Message, type Settings } from '../../main/contract/types.ts';

export const FILE_FORMAT = 'ropewalk.conversation';
export const FILE_VERSION = 1;

/** What an import needs: the title and the messages in order. */
export interface ImportedConversation {
  title: string;
  messages: Array<Pick<Message, 'role' | 'content' | 'reasoning' | 'stats' | 'error'> & { status: Exclude<Message['status'], 'streaming'>; attachments?: ExportedAttachment[] }>;
}

export class ConversationFileError extends Error {
  readonly code = 'BAD_CONVERSATION_FILE';
  constructor(message: string) {
    super(message);
    this.name = 'ConversationFileError';
  }
}

interface ExportContext {
  settings: Settings | null;
  /** The model's name, if one is loaded. */
  model: string | null;
  /** ms since the epoch. */
  now: number;
  /** The extracted text of the documents the messages carry, by document id (absent: none to export). */
  documentTexts?: ReadonlyMap<string, string>;
}

function attachmentsOf(documents: readonly DocumentInfo[] | undefined, texts: ReadonlyMap<string, string> | undefined): ExportedAttachment[] {
  return (documents ?? []).map((d) => ({ name: d.name, kind: d.kind, hash: d.hash, text: texts?.get(d.id) ?? null }));
}

export function conversationToJson(conversation: Conversation, ctx: ExportContext): string {
  return `${JSON.stringify(
    {
      format: FILE_FORMAT,
      version: FILE_VERSION,
      title: conversation.title,
      createdAt: conversation.createdAt,
      exportedAt: ctx.now,
      model: ctx.model,
      settings: ctx.settings,
      messages: conversation.messages.map(({ role, content, reasoning, documents, status, stats, error, createdAt }) => {
        const attachments = attachmentsOf(documents, ctx.documentTexts);
        return { role, content, ...(reasoning ? { reasoning } : {}), ...(attachments.length ? { attachments } : {}), status, stats, error, createdAt };
      }),
    },
    null,
    2,
  )}\n`;
}

export function conversationToMarkdown(conversation: Conversation, ctx: ExportContext): string {
  const lines = [`# ${conversation.title}`, ''];
  const now = [...(ctx.model ? [`model ${ctx.model}`] : []), ...(ctx.settings ? settingsFacts(ctx.settings) : [])];
  lines.push(`_${[`Exported ${new Date(ctx.now).toISOString()}`, ...(now.length ? [`settings at export: ${now.join(' · ')}`] : [])].join(' · ')}_`, '');
  if (ctx.settings?.systemPrompt) lines.push('## System', '', ctx.settings.systemPrompt, '');
  for (const m of conversation.messages) {
    lines.push(m.role === 'user' ? '## You' : m.role === 'assistant' ? '## Assistant' : '## System', '');
    if (m.reasoning) lines.push(quoted(m.reasoning, m.stats), '');
    lines.push(m.content, '');
    if (m.documents?.length) lines.push(`_Attached: ${m.documents.map((d) => `${d.name} (${d.kind})`).join(', ')}_`, '');
    if (m.stats) lines.push(`_${statsLine(m.stats)}_`, '');
    if (m.error) lines.push(`_Error: ${m.error}_`, '');
  }
  return `${lines.join('\n').trimEnd()}\n`;
}

/** An answer's thinking as a Markdown block quote, headed with its tokens and time when known. */
function quoted(reasoning: string, stats: AnswerStats | null): string {
  const facts = stats?.reasoningTokens ? ` (${stats.reasoningTokens} tokens, ${((stats.reasoningMs ?? 0) / 1000).toFixed(1)} s)` : '';
  return [`**Thinking**${facts}`, '', ...reasoning.split('\n')].map((l) => (l ? `> ${l}` : '>')).join('\n');
}

/** The settings as the export writes them: "max context 2048 · max new tokens 256 · … · seed random". */
function settingsFacts(s: AnswerSettings): string[] {
  return [`max context ${s.maxContext}`, `max new tokens ${s.maxTokens}`, `temperature ${s.temperature}`, `top-k ${s.topK}`, `top-p ${s.topP}`, `min-p ${s.minP}`, `seed ${s.seed ?? 'random'}`];
}

/** An answer's stats line, with the model and settings that wrote it when its stats recorded them. */
function statsLine(s: AnswerStats): string {
  const own = [...(s.model ? [`model ${s.model}`] : []), ...(s.settings ? settingsFacts(s.settings) : [])];
  const run = s.generatedTokens === 0 ? `${s.finishReason} before the first token · ${s.promptTokens} prompt tokens` : `${s.generatedTokens} tokens · TTFT ${Math.round(s.ttftMs)} ms · ${s.decodeTokensPerSec.toFixed(1)} tok/s · ${s.finishReason}`;
  return [run, ...own].join(' · ');
}

const ROLES = new Set(['user', 'assistant', 'system']);
const STATUSES = new Set(['complete', 'cancelled', 'error', 'streaming']);

/**
 * Reads a JSON export back. An answer saved while it streamed comes back as interrupted ('error').
 * @throws ConversationFileError naming what is wrong (not JSON, another format, a bad message).
 */
export function parseConversationFile(text: string): ImportedConversation {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (e) {
    throw new ConversationFileError(`the file is not JSON (${(e as Error).message})`);
  }
  const file = data as Record<string, unknown> | null;
  if (!file || typeof file !== 'object' || file.format !== FILE_FORMAT) {
    throw new ConversationFileError(`the file is not a Ropewalk conversation export (format ${JSON.stringify(file?.format ?? null)?.slice(0, 60)})`);
  }
  if (file.version !== FILE_VERSION) throw new ConversationFileError(`the file's version ${JSON.stringify(file.version)} is not one this Ropewalk reads (${FILE_VERSION})`);
  if (!Array.isArray(file.messages)) throw new ConversationFileError('the file has no messages list');
  const title = typeof file.title === 'string' && file.title.trim() ? file.title.trim().slice(0, 200) : 'Imported chat';
  const messages = file.messages.map((raw: unknown, i: number): ImportedConversation['messages'][number] => {
    const m = raw as Record<string, unknown> | null;
    if (!m || typeof m !== 'object' || typeof m.content !== 'string' || !ROLES.has(m.role as string)) {
      throw new ConversationFileError(`message ${i + 1} needs a role (user, assistant or system) and text content`);
    }
    const status = STATUSES.has(m.status as string) ? (m.status as Message['status']) : 'complete';
    return {
      role: m.role as Message['role'],
      content: m.content,
      ...(typeof m.reasoning === 'string' && m.reasoning ? { reasoning: m.reasoning } : {}),
      status: status === 'streaming' ? 'error' : status,
      stats: m.stats && typeof m.stats === 'object' ? (m.stats as AnswerStats) : null,
      error: typeof m.error === 'string' ? m.error : status === 'streaming' ? 'interrupted before it was exported' : null,
      ...attachmentsIn(m.role === 'user' ? m.attachments : undefined),
    };
  });
  return { title, messages };
}

/** The documents of an exported message that can come back: named, of a known kind, hashed, with text. */
function attachmentsIn(raw: unknown): { attachments?: ExportedAttachment[] } {
  if (!Array.isArray(raw)) return {};
  const kinds: readonly string[] = DOCUMENT_KINDS;
  const ok = raw.filter(
    (a): a is ExportedAttachment =>
      Boolean(a) && typeof a.name === 'string' && a.name.trim() !== '' && kinds.includes(a.kind as DocumentKind) && typeof a.hash === 'string' && /^[0-9a-f]{64}$/.test(a.hash) && typeof a.text === 'string',
  );
  return ok.length ? { attachments: ok.slice(0, 16).map(({ name, kind, hash, text }) => ({ name: name.trim().slice(0, 255), kind, hash, text })) } : {};
}

/** A file name for a conversation's export: its title, made safe, and the extension. */
export function exportFileName(title: string, extension: 'md' | 'json'): string {
  const base = title.replace(/[^\p{L}\p{N} ._-]+/gu, ' ').replace(/\s+/g, ' ').trim().slice(0, 60) || 'conversation';
  return `${base}.${extension}`;
}
