/**
 * The chat store's types, in one place below every slice: the state (the slices' interfaces
 * joined), its dependencies, and the shapes the slices share. Slices import from here, never
 * from `../chat.ts` (which builds the store), so the store and its slices form no import cycle.
 */
import type { StoreApi } from 'zustand/vanilla';
import type { EventTypes, RopewalkApi } from '../../../main/contract/channels.ts';
import type { Conversation, DocumentFit, DocumentInfo, DocumentText, Message } from '../../../main/contract/types.ts';
import type { KeyValueStorage } from '../../lib/storage.ts';
import type { FrameScheduler } from '../../lib/stream-buffer.ts';
import type { BudgetStore } from '../budget.ts';
import type { NoticesStore } from '../notices.ts';

/** Progress of an answer being generated. */
export interface LiveAnswer {
  generatedTokens: number;
  prefill: { processed: number; total: number } | null;
  /** Requests ahead of it while it waits for the engine (an API request is being answered). */
  waiting?: number;
  /** Decode speed so far (the services' measure from the tokens' times); absent before two tokens. */
  tokensPerSec?: number;
}

export type PendingAction = 'send' | 'regenerate' | 'edit' | 'continue' | null;

export interface AnswerSlice {
  /** The send / regenerate / edit call in flight, if any. */
  pending: PendingAction;
  /** The message (yours, or an answer) being edited inline. */
  editingId: string | null;
  /** Sends the draft; resolves true when the services accepted it. */
  send(): Promise<boolean>;
  stop(): Promise<void>;
  regenerate(): Promise<void>;
  startEdit(messageId: string): void;
  cancelEdit(): void;
  /**
   * Saves an edit: your message is resent (its answers stay as the earlier branch); an answer's
   * text becomes a new version at its place, nothing generated. Resolves true when accepted.
   */
  submitEdit(messageId: string, content: string): Promise<boolean>;
  /** Continues the last answer when it reached max new tokens; it streams on in the same message. */
  continueAnswer(): Promise<void>;
  /** Shows another version of a message (‹ i/n ›) and what followed it; the meter follows. */
  selectBranch(messageId: string): Promise<void>;
}

export interface ConversationSlice {
  conversationId: string | null;
  messages: Message[];
  loading: boolean;
  /** Opens a conversation (null: none), fetching its messages. */
  open(id: string | null): Promise<void>;
  /** Shows a conversation already in hand (just created). */
  show(conversation: Conversation): void;
  /**
   * New chat: shows an empty chat at once and opens the conversation `create` makes once it
   * exists, keeping what was typed (or sent) meanwhile; opens nothing if the user went to another
   * conversation first. @returns the created conversation. @throws what `create` throws (the empty chat stays).
   */
  startNew(create: () => Promise<Conversation>): Promise<Conversation>;
  /** Deletes a message with its answer (a user message takes the answers after it). */
  deleteMessage(messageId: string): Promise<void>;
}

/** A file as the window hands it over: its name and bytes (a DOM File has both). */
export interface FileLike {
  name: string;
  arrayBuffer(): Promise<ArrayBuffer>;
}

export interface DocumentsSlice {
  /** Attached to the draft, in order. */
  attachments: DocumentInfo[];
  /** Names of the files being read and extracted. */
  attaching: string[];
  /** Extraction progress (0…1) of large files being attached, by name. */
  progress: Record<string, number>;
  /** Names of the files being read by OCR now (their progress is the OCR's). */
  ocr: Record<string, true>;
  /** A `documentProgress` event. */
  onDocumentProgress(e: { name: string; fraction: number; phase?: 'ocr' }): void;
  /** Stops reading the files of that name (the attach ends without a notice). */
  stopAttaching(name: string): void;
  /** The document shown in the reader (a chip, a "Used:" part or a citation was opened), or null. */
  reading: (DocumentText & { highlight?: { start: number; end: number } }) | null;
  attachFiles(files: readonly FileLike[]): Promise<void>;
  removeAttachment(id: string): void;
  /** Sets how every attached document goes into the prompt ("use the relevant parts": 'relevant'). */
  setFit(fit: DocumentFit): void;
  /** Drops every attachment of the draft (the not-fit offer's Cancel). */
  clearAttachments(): void;
  /**
   * Opens a document in the reader; `at` highlights a passage: a UTF-16 range of its text, or a
   * part by label ('page 2', '§ Setup'; a citation). A part the document lacks opens it unhighlighted.
   * `name`: the name it was attached under (the same content under two names is one document).
   */
  openDocument(id: string, at?: { start: number; end: number } | { part: string }, name?: string): Promise<void>;
  closeDocument(): void;
  /** The extracted text of every document the open conversation's messages carry, by id (for an export). */
  documentTexts(): Promise<Map<string, string>>;
}

export interface DraftSlice {
  draft: string;
  /** Why the last Send was refused (cleared when the draft changes). */
  refusal: string | null;
  setDraft(text: string): void;
  /**
   * Forgets the drafts of conversations that no longer exist: `existingIds` is the whole list of
   * conversation ids (not a search result). The draft of "no conversation yet" ('') is kept.
   */
  keepDraftsOf(existingIds: readonly string[]): void;
  /** Forgets one conversation's draft (it was deleted). */
  forgetDraft(conversationId: string): void;
}

export interface StreamSlice {
  /** Progress of the answers that stream, by assistant message id. */
  live: Record<string, LiveAnswer>;
  onDelta(event: EventTypes['answerDelta']): void;
  onWaiting(event: EventTypes['answerWaiting']): void;
  onPrefill(event: EventTypes['answerPrefill']): void;
  onDone(event: EventTypes['answerDone']): void;
  /** The disk refused (or took again) an answer's writes: sets or clears its `notSaved`. */
  onSaveState(event: EventTypes['answerSaveState']): void;
  /** Cancels the pending frame. */
  dispose(): void;
}

export type ChatState = ConversationSlice & DraftSlice & DocumentsSlice & AnswerSlice & StreamSlice;

export type ChatStore = StoreApi<ChatState>;

export interface ChatDeps {
  api: RopewalkApi;
  notices: NoticesStore;
  budget: () => BudgetStore;
  frames: FrameScheduler;
  /** A conversation was created here (so the list can show it at once). */
  onCreated(conversation: Conversation): void;
  /** Where unsent drafts are kept across reloads (none in tests). */
  storage?: KeyValueStorage;
}
