/**
 * Documents in conversations: attaching a file (extract off the main thread, store once per
 * content, count its tokens for the loaded model), opening its text, and assembling the prompt
 * messages of a conversation with the documents in the user turns that carry them.
 *
 * Prompt assembly (`assemble`): every user message is expanded to `userTurnText(question,
 * blocks)`; a document attached with fit 'whole' is its whole text. A document attached with fit
 * 'relevant' is its whole text too while the prompt fits; when it does not, it becomes the
 * chunks that rank best (BM25) against the latest question, as many as the room left
 * (max context − reserve − everything else) allows, shared between such documents in proportion
 * to their size; the result is recounted with the real template and shrunk until it fits.
 * The same assembly feeds the budget (counted) and the answer (generated), so both agree.
 */
import type { DocumentFit, DocumentInfo, DocumentText, Message } from '../contract/types.ts';
import type { EngineHost } from '../engine-host/host.ts';
import type { ChatMessage } from '../engine/generate/types.ts';
import { chunkDocument, type Chunk } from '../documents/chunk.ts';
import { extractDocumentOffThread } from '../documents/extract-off-thread.ts';
import type { ExtractProgress } from '../documents/extract.ts';
import { chunkLabel, chunksBody, documentBlock, userTurnText } from '../documents/prompt.ts';
import { rankChunks, selectChunks } from '../documents/rank.ts';
import { historyMessages } from './budget.ts';
import type { Attachment, ConversationStore, StoredDocument } from './store.ts';

/**
 * Chunk size for "use the relevant parts", tokens: an eighth of the room, as a power of two in
 * [32, 256], so even a small max context holds several chunks (and a few sizes are cached);
 * the overlap is an eighth of a chunk.
 */
export function chunkTokensFor(room: number): number {
  const target = Math.max(32, Math.min(256, Math.floor(room / 8)));
  return 2 ** Math.floor(Math.log2(target));
}
/** Recounts allowed while shrinking the relevant parts to fit. */
const FIT_ROUNDS = 4;
const CHUNK_CACHE_ENTRIES = 8;

/** A prompt ready to count or generate from. */
export interface AssembledPrompt {
  /** System prompt, then the history with the documents in their turns. */
  messages: ChatMessage[];
  /** The same conversation without any document (for the budget's split). */
  plain: ChatMessage[];
  /** Parts used, when some document was cut to its relevant chunks ("rope.pdf: page 3, chunk 5"). */
  documentParts: string[] | null;
}

/** Documents attached to a message not stored yet (the composer's draft). */
export interface Draft {
  content: string;
  documents: readonly { id: string; fit: DocumentFit }[];
}

export class DocumentService {
  private readonly chunks = new Map<string, Promise<Chunk[]>>();

  constructor(
    private readonly host: EngineHost,
    private readonly store: ConversationStore,
  ) {}

  /**
   * Extracts, stores (once per content) and counts a file.
   * @throws DocumentError naming the file; nothing is stored then.
   */
  async attach(name: string, bytes: Uint8Array, onProgress?: ExtractProgress): Promise<DocumentInfo> {
    const extracted = await extractDocumentOffThread(name, bytes, { onProgress });
    const stored = this.store.putDocument(extracted);
    return this.withTokens(stored);
  }

  /** A document with its text. @throws NOT_FOUND. */
  async open(id: string): Promise<DocumentText> {
    const d = this.store.getDocument(id);
    return { ...(await this.withTokens(d)), text: d.text, parts: d.parts };
  }

  /** Info of stored documents, counted for the loaded model. @throws NOT_FOUND. */
  async infos(ids: readonly { id: string; fit: DocumentFit }[]): Promise<DocumentInfo[]> {
    return Promise.all(ids.map(async (d) => ({ ...(await this.withTokens(this.store.getDocument(d.id))), fit: d.fit })));
  }

  /**
   * The prompt of a conversation: `system`, then `history` (ending with the message being
   * answered, if any), then the draft (if given) as the last user turn.
   * @param room max context − reserve: the most prompt tokens allowed (relevant parts shrink to it).
   */
  async assemble(system: ChatMessage[], history: readonly Message[], draft: Draft | null, room: number): Promise<AssembledPrompt> {
    const turns = history.map((m) => ({ message: m, attachments: m.role === 'user' && m.documents?.length ? this.store.attachmentsOf(m.id) : [] }));
    if (draft) {
      const attachments = draft.documents.map((d) => ({ document: this.store.getDocument(d.id), fit: d.fit }));
      turns.push({ message: draftMessage(draft.content, attachments), attachments });
    }
    const render = (body: (a: Attachment) => string) => {
      const byId = new Map(turns.map((t) => [t.message.id, t.attachments]));
      return [...system, ...historyMessages(turns.map((t) => t.message), (m) => userTurnText(m.content, (byId.get(m.id) ?? []).map((a) => documentBlock(a.document.name, body(a)))))];
    };
    const plain = [...system, ...historyMessages(turns.map((t) => t.message))];
    const whole = render((a) => a.document.text);
    const relevant = turns.flatMap((t) => t.attachments).filter((a) => a.fit === 'relevant');
    if (relevant.length === 0 || (await this.host.countTokens({ messages: whole })) <= room) return { messages: whole, plain, documentParts: null };
    return this.fitRelevant(render, relevant, lastQuestion(turns.map((t) => t.message)), room, plain);
  }

  /** Chunks of the 'relevant' documents that rank best, shrunk until the prompt fits `room`. */
  private async fitRelevant(
    render: (body: (a: Attachment) => string) => ChatMessage[],
    relevant: Attachment[],
    question: string,
    room: number,
    plain: ChatMessage[],
  ): Promise<AssembledPrompt> {
    const withoutRelevant = await this.host.countTokens({ messages: render((a) => (a.fit === 'relevant' ? '' : a.document.text)) });
    const size = chunkTokensFor(room);
    const chunked = await Promise.all(relevant.map(async (a) => ({ a, chunks: await this.chunksOf(a.document, size) })));
    const sizes = chunked.map(({ chunks }) => chunks.reduce((n, c) => n + c.tokens, 0));
    const totalSize = sizes.reduce((n, s) => n + s, 0) || 1;
    const [separator] = await this.host.countEach(['\n\n[page 10, chunk 10]\n']);
    let avail = room - withoutRelevant;
    let best: AssembledPrompt | null = null;
    for (let round = 0; round < FIT_ROUNDS && avail > 0; round++) {
      const chosen = new Map<Attachment, Chunk[]>();
      chunked.forEach(({ a, chunks }, i) => chosen.set(a, selectChunks(chunks, rankChunks(chunks, question), Math.floor((avail * sizes[i]) / totalSize), separator)));
      const messages = render((a) => (a.fit === 'relevant' ? chunksBody(chosen.get(a) ?? []) : a.document.text));
      const used = await this.host.countTokens({ messages });
      best = { messages, plain, documentParts: [...chosen].flatMap(([a, cs]) => cs.map((c) => `${a.document.name}: ${chunkLabel(c)}`)) };
      if (used <= room) return best;
      avail -= used - room + separator;
    }
    // Not even the other turns fit: return the smallest try; the budget shows it does not fit.
    return best ?? { messages: render((a) => (a.fit === 'relevant' ? '' : a.document.text)), plain, documentParts: [] };
  }

  /** A document's chunks for the loaded model's tokenizer (cached for the last few documents). */
  private chunksOf(d: StoredDocument, size: number): Promise<Chunk[]> {
    const key = `${d.id}\u0000${size}\u0000${this.host.model?.bundleDir ?? ''}`;
    let hit = this.chunks.get(key);
    if (!hit) {
      hit = chunkDocument(d.text, d.parts, (texts) => this.host.countEach(texts), { chunkTokens: size, overlapTokens: size / 8 });
      this.chunks.set(key, hit);
      hit.catch(() => this.chunks.delete(key));
      if (this.chunks.size > CHUNK_CACHE_ENTRIES) this.chunks.delete(this.chunks.keys().next().value!);
    }
    return hit;
  }

  /** The document's info with its token count for the loaded model (counted once per model, stored). */
  private async withTokens(d: StoredDocument): Promise<DocumentInfo> {
    const model = this.host.model?.bundleDir;
    const { text: _text, parts: _parts, ...info } = d;
    if (!model) return info;
    const stored = this.store.documentTokens(d.id, model);
    if (stored !== null) return { ...info, tokens: stored };
    const [tokens] = await this.host.countEach([d.text]);
    this.store.setDocumentTokens(d.id, tokens, model);
    return { ...info, tokens };
  }
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
