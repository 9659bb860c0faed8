/**
 * The conversation store's rows as SQLite returns them (snake_case, JSON in TEXT columns) and the
 * mappings to the contract's types (`main/contract/types.ts`), plus the shapes the store's parts
 * share. Pure: no database access here.
 */
import type { AnswerStats, ChatSettings, ContextFullPolicy, ConversationSummary, DocumentFit, DocumentInfo, Message, MessageStatus, Role } from '../../contract/types.ts';
import type { DocumentPart } from '../../documents/extract.ts';
import { ServiceError } from '../errors.ts';

export interface ConversationRow {
  id: string;
  title: string;
  title_source: 'default' | 'auto' | 'user';
  created_at: number;
  updated_at: number;
  context_full_policy: ContextFullPolicy | null;
  thinking: 0 | 1 | null;
  /** JSON ChatSettings; NULL: none of its own. */
  chat_settings: string | null;
}

export interface MessageRow {
  id: string;
  conversation_id: string;
  seq: number;
  role: Role;
  content: string;
  status: MessageStatus;
  stats: string | null;
  error: string | null;
  created_at: number;
  parent_id: string | null;
  on_path: 0 | 1;
  reasoning: string | null;
}

export interface DocumentRow {
  id: string;
  hash: string;
  name: string;
  kind: DocumentInfo['kind'];
  size: number;
  text: string;
  parts: string;
  tokens: number | null;
  tokens_model: string | null;
  created_at: number;
  ocr_pages: string | null;
  pages_without_text: string | null;
}

/** A stored document with its text and parts. */
export interface StoredDocument extends DocumentInfo {
  text: string;
  parts: DocumentPart[];
}

/** A document attached to a message, as the prompt uses it. */
export interface Attachment {
  document: StoredDocument;
  fit: DocumentFit;
}

/** What may change on a message after it was appended. */
export interface MessagePatch {
  content?: string;
  /** The reasoning ('' or null: none). */
  reasoning?: string | null;
  status?: MessageStatus;
  stats?: AnswerStats | null;
  error?: string | null;
}

/** The typed error for a missing row: `no <what> with id <id>` (the id cut at 64 characters). */
export function notFound(what: string, id: string): ServiceError {
  return new ServiceError('NOT_FOUND', `no ${what} with id ${id.slice(0, 64)}`);
}

export function toSummary(r: ConversationRow): ConversationSummary {
  const summary: ConversationSummary = { id: r.id, title: r.title, createdAt: r.created_at, updatedAt: r.updated_at };
  if (r.context_full_policy) summary.contextFullPolicy = r.context_full_policy;
  if (r.thinking !== null && r.thinking !== undefined) summary.thinking = r.thinking === 1;
  const own = chatSettingsOf(r.chat_settings);
  if (own) summary.chatSettings = own;
  return summary;
}

/** A stored chat_settings value as ChatSettings; null for none, an empty object, or a hand-edited value that is not an object. */
export function chatSettingsOf(json: string | null | undefined): ChatSettings | null {
  if (!json) return null;
  try {
    const v = JSON.parse(json) as unknown;
    return v && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length > 0 ? (v as ChatSettings) : null;
  } catch {
    return null;
  }
}

export function toDocumentInfo(r: Pick<DocumentRow, 'id' | 'hash' | 'name' | 'kind' | 'size' | 'tokens' | 'tokens_model' | 'ocr_pages' | 'pages_without_text'>): DocumentInfo {
  const info: DocumentInfo = { id: r.id, name: r.name, kind: r.kind, size: r.size, hash: r.hash, tokens: r.tokens, fit: 'whole' };
  if (r.ocr_pages) info.ocrPages = JSON.parse(r.ocr_pages) as number[];
  if (r.pages_without_text) info.pagesWithoutText = JSON.parse(r.pages_without_text) as number[];
  return info;
}

/** Page numbers as stored: a JSON array, or NULL for none. */
export function pageList(pages: readonly number[] | undefined): string | null {
  return pages && pages.length > 0 ? JSON.stringify(pages) : null;
}

export function toStoredDocument(r: DocumentRow): StoredDocument {
  return { ...toDocumentInfo(r), text: r.text, parts: JSON.parse(r.parts) as DocumentPart[] };
}

/** The message with `branches` set when there are other versions at its place. */
export function withBranches(m: Message, versions: readonly string[] | undefined): Message {
  return versions && versions.length > 1 ? { ...m, branches: [...versions] } : m;
}

export function toMessage(r: MessageRow, documents: DocumentInfo[] = []): Message {
  return {
    documents,
    id: r.id,
    conversationId: r.conversation_id,
    role: r.role,
    content: r.content,
    ...(r.reasoning ? { reasoning: r.reasoning } : {}),
    status: r.status,
    stats: r.stats ? (JSON.parse(r.stats) as AnswerStats) : null,
    error: r.error,
    createdAt: r.created_at,
  };
}
