/**
 * Documents in conversations: attaching a file (extract off the main thread, store once per
 * content, count its tokens for the loaded model), opening its text, and assembling the prompt
 * messages of a conversation with the documents in the user turns that carry them.
 *
 * Prompt assembly (`assemble`): every user message is expanded to `userTurnText(question,
 * blocks)`; a document is its whole text, or, attached with fit 'relevant' when the prompt does
 * not fit, the chunks that rank best against the latest question (`fitDocuments`), so each
 * follow-up re-ranks. The same assembly feeds the budget (counted) and the answer (generated).
 */
import type { AttachedDocument, DocumentInfo, DocumentText, Message } from '../contract/types.ts';
import type { ChatEngine } from '../engine-host/chat-engine.ts';
import type { ChatMessage } from '../engine/generate/types.ts';
import { ChunkCache, fitDocuments, type AttachedText } from '../documents/assemble.ts';
import { extractDocumentOffThread } from '../documents/extract-off-thread.ts';
import type { ExtractProgress } from '../documents/extract.ts';
import { documentBlock, userTurnText } from '../documents/prompt.ts';
import { EXACT_CHARS } from '../documents/chunk.ts';
import { documentTokens } from '../documents/token-cache.ts';
import { historyMessages } from './history.ts';
import type { Attachment, ConversationStore, StoredDocument } from './store.ts';

/** A prompt ready to count or generate from. */
export interface AssembledPrompt {
  /** System prompt, then the history with the documents in their turns. */
  messages: ChatMessage[];
  /** The same conversation without any document (for the budget's split). */
  plain: ChatMessage[];
  /** Parts used, when some document was cut to its relevant chunks ("rope.pdf: page 3, chunk 5"). */
  documentParts: string[] | null;
  /** For each of `documentParts`: the document and the chunk's UTF-16 range in its text (the reader opens there). */
  documentRanges: { documentId: string; start: number; end: number }[] | null;
  /** Whole documents too long to count, measured instead (assemble.ts FitResult.measured); null: count `messages`. */
  measured: { messages: ChatMessage[]; tokens: number } | null;
}

/** Documents attached to a message not stored yet (the composer's draft). */
export interface Draft {
  content: string;
  documents: readonly AttachedDocument[];
}

export class DocumentService {
  private readonly chunks = new ChunkCache();

  constructor(
    private readonly engine: ChatEngine,
    private readonly store: ConversationStore,
  ) {}

  /**
   * Extracts (scanned pages and images by OCR), stores (once per content) and counts a file.
   * @param signal stops the extraction (DOCUMENT_CANCELLED).
   * @throws DocumentError naming the file; nothing is stored then.
   */
  async attach(name: string, bytes: Uint8Array, onProgress?: ExtractProgress, signal?: AbortSignal): Promise<DocumentInfo> {
    const extracted = await extractDocumentOffThread(name, bytes, { onProgress, signal });
    const stored = this.store.putDocument(extracted);
    return this.withTokens(stored);
  }

  /** A document with its text. @throws NOT_FOUND. */
  async open(id: string): Promise<DocumentText> {
    const d = this.store.getDocument(id);
    return { ...(await this.withTokens(d)), text: d.text, parts: d.parts };
  }

  /** Info of stored documents, counted for the loaded model. @throws NOT_FOUND. */
  async infos(ids: readonly AttachedDocument[]): Promise<DocumentInfo[]> {
    return Promise.all(ids.map(async (d) => ({ ...(await this.withTokens(named(this.store.getDocument(d.id), d.name))), fit: d.fit })));
  }

  /**
   * The prompt of a conversation: `system`, then `history` (ending with the message being
   * answered, if any), then the draft (if given) as the last user turn, with the documents in
   * their turns, whole or cut to fit `room` (see fitDocuments).
   * @param room max context − reserve: the most prompt tokens allowed.
   */
  async assemble(system: ChatMessage[], history: readonly Message[], draft: Draft | null, room: number): Promise<AssembledPrompt> {
    const model = this.engine.model?.bundleDir ?? '';
    const turns = history.map((m) => ({ message: m, attachments: m.role === 'user' && m.documents?.length ? this.store.attachmentsOf(m.id) : [] }));
    if (draft) {
      const attachments = draft.documents.map((d) => ({ document: named(this.store.getDocument(d.id), d.name), fit: d.fit }));
      turns.push({ message: draftMessage(draft.content, attachments), attachments });
    }
    const texts = new Map(turns.map((t) => [t.message.id, t.attachments.map((a): AttachedText => ({ key: `${a.document.id}\u0000${model}`, name: a.document.name, text: a.document.text, parts: a.document.parts, fit: a.fit }))]));
    const ids = turns.flatMap((t) => t.attachments.map((a) => a.document.id));
    const messages = turns.map((t) => t.message);
    const plain = [...system, ...historyMessages(messages)];
    const fitted = await fitDocuments({
      counter: this.engine,
      render: (body) => [...system, ...historyMessages(messages, (m) => userTurnText(m.content, (texts.get(m.id) ?? []).map((a) => documentBlock(a.name, body(a)))))],
      attachments: [...texts.values()].flat(),
      question: lastQuestion(messages),
      room,
      cache: this.chunks,
      tokenizer: model,
    });
    const documentRanges = fitted.usedRanges?.map((r) => ({ documentId: ids[r.attachment], start: r.start, end: r.end })) ?? null;
    return { messages: fitted.messages, documentParts: fitted.documentParts, documentRanges, plain, measured: fitted.measured };
  }

  /**
   * The document's info with its token count for the loaded model (counted once per model,
   * stored) by token-cache.ts `documentTokens` through the chunk cache's counts (which the
   * relevant parts reuse): whole up to 64 Ki characters, in paragraphs up to 256 Ki (one encode
   * of megabytes takes minutes), beyond measured (`tokensEstimated`: the chip says ≈), so
   * attaching 5 MB tokenizes 16 KB.
   */
  private async withTokens(d: StoredDocument): Promise<DocumentInfo> {
    const model = this.engine.model?.bundleDir;
    const { text: _text, parts: _parts, ...info } = d;
    if (!model) return info;
    const stored = this.store.documentTokens(d.id, model);
    if (stored !== null) return { ...info, tokens: stored, ...estimated(d) };
    const { tokens } = await documentTokens(d.text, this.chunks.counter(model, this.engine));
    this.store.setDocumentTokens(d.id, tokens, model);
    return { ...info, tokens, ...estimated(d) };
  }
}

/** A stored document under the name of the file attached (absent: its own). */
function named(d: StoredDocument, name: string | undefined): StoredDocument {
  return name ? { ...d, name } : d;
}

/** `tokensEstimated` for a text too long to count (see withTokens). */
function estimated(d: StoredDocument): { tokensEstimated?: true } {
  return d.text.length > EXACT_CHARS ? { tokensEstimated: true } : {};
}

/** The text the latest user message asks (what the relevant parts are ranked against). */
function lastQuestion(messages: readonly Message[]): string {
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i].role === 'user') return messages[i].content;
  return '';
}

function draftMessage(content: string, attachments: Attachment[]): Message {
  return {
    id: '\u0000draft',
    conversationId: '',
    role: 'user',
    content,
    status: 'complete',
    stats: null,
    error: null,
    createdAt: 0,
    documents: attachments.map((a) => ({ ...a.document, fit: a.fit })),
  };
}
