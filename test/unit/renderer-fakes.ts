/**
 * Fakes for the renderer's store tests: a manual frame scheduler (frames run when the test says)
 * and the services in memory behind the RopewalkApi contract (one token per character, every
 * call recorded, failures and early events on demand). Not a test file itself.
 */
import type { Timers } from '../../renderer/lib/debounce.ts';
import { DEFAULT_SETTINGS } from '../../main/services/settings.ts';
import type { EventTypes, RequestOf, ResponseOf, RopewalkApi } from '../../main/contract/channels.ts';
import type { EventName, MethodName } from '../../main/contract/names.ts';
import type { ContextBudget, Conversation, DocumentText, Message, ModelState, Settings } from '../../main/contract/types.ts';
import type { ModelLibrary } from '../../main/contract/library.ts';
import { ApiError } from '../../renderer/lib/errors.ts';
import type { FrameScheduler } from '../../renderer/lib/stream-buffer.ts';

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Lets pending promise callbacks run. */
export const settle = () => sleep(0);

/** Callbacks queued by handle that run only when the test says so: the one rule behind ManualTimers and ManualFrames. */
class ManualQueue {
  private next = 1;
  readonly queued = new Map<number, () => void>();
  add(callback: () => void): number {
    const id = this.next++;
    this.queued.set(id, callback);
    return id;
  }
  remove(handle: unknown): void {
    this.queued.delete(handle as number);
  }
  /** Runs what is queued now, in the order it was queued (what those callbacks queue waits for the next run); returns how many ran. */
  runAll(): number {
    const due = [...this.queued.values()];
    this.queued.clear();
    for (const cb of due) cb();
    return due.length;
  }
}

/** Timers that fire only when the test says so: `runDue()` runs every timer set so far (their quiet periods have passed). */
export class ManualTimers extends ManualQueue implements Timers {
  set(callback: () => void): number {
    return this.add(callback);
  }
  clear(handle: unknown): void {
    this.remove(handle);
  }
  /** Fires the timers waiting now (each debouncer's last call), in the order they were set. */
  runDue(): number {
    return this.runAll();
  }
}

/** A scheduler whose frames run only when the test says so (`tick`). */
export class ManualFrames extends ManualQueue implements FrameScheduler {
  /** How many frames were asked for. */
  requests = 0;
  request(cb: () => void): number {
    this.requests++;
    return this.add(cb);
  }
  cancel(handle: unknown): void {
    this.remove(handle);
  }
  /** Runs the frames queued now. */
  tick(): void {
    this.runAll();
  }
}

/** The services' settings as the fakes start them (a copy per FakeApi). */
export const FAKE_SETTINGS: Readonly<Settings> = { ...DEFAULT_SETTINGS, maxContext: 2048, maxTokens: 256 };

/**
 * The services in memory: one token per character, so budgets are easy to predict. Records every
 * call; `fail(method)` makes the next call of a method reject; `emit` pushes an event.
 */
export class FakeApi {
  calls: Array<[MethodName, unknown]> = [];
  conversations = new Map<string, Conversation>();
  documents = new Map<string, DocumentText>();
  settings: Settings = { ...FAKE_SETTINGS };
  model: ModelState = {
    status: 'ready',
    info: { name: 'stories260K', architecture: 'llama', trainedContext: 512, maxContext: 512, vocabSize: 512, backend: 'native', executionProvider: 'cpu', nodesOnCpu: null, adapter: null, fallbackReason: null, hasChatTemplate: false, weights: { formats: 'float32 ×48', bundleBytes: 1_236_992, residentBytes: 1_171_200 } },
    progress: null,
    error: null,
  };
  /** Runs inside sendMessage before it answers (to emit early events). */
  beforeSendAnswers: ((assistant: Message) => void) | null = null;
  /** Runs inside selectBranch: puts the chosen version on the conversation's path. */
  onSelectBranch: ((c: Conversation, messageId: string) => void) | null = null;
  /** Runs inside getConversation after its snapshot is taken, before it answers. */
  afterConversationSnapshot: ((c: Conversation) => void) | null = null;
  private failures = new Map<MethodName, ApiError>();
  private listeners = new Map<EventName, Set<(data: never) => void>>();
  private nextId = 1;
  private clock = 1_000;

  fail(method: MethodName, code = 'BOOM', message = `${method} failed`): void {
    this.failures.set(method, new ApiError(code, message));
  }
  emit<E extends EventName>(event: E, data: EventTypes[E]): void {
    for (const l of this.listeners.get(event) ?? []) (l as (d: EventTypes[E]) => void)(data);
  }
  count(method: MethodName): number {
    return this.calls.filter(([m]) => m === method).length;
  }
  addConversation(title: string, messages: Array<[Message['role'], string]> = []): Conversation {
    const id = `c${this.nextId++}`;
    const t = this.clock++;
    const c: Conversation = { id, title, createdAt: t, updatedAt: t, messages: messages.map(([role, content]) => this.message(id, role, content, 'complete')) };
    this.conversations.set(id, c);
    return c;
  }
  message(conversationId: string, role: Message['role'], content: string, status: Message['status']): Message {
    return { id: `m${this.nextId++}`, conversationId, role, content, status, stats: null, error: null, createdAt: this.clock++ };
  }
  budgetOf(conversationId: string | null, draft: string, attached: readonly { id: string }[] = []): ContextBudget {
    const c = conversationId ? this.conversations.get(conversationId) : undefined;
    const system = this.settings.systemPrompt.length;
    const history = (c?.messages ?? []).reduce((n, m) => n + m.content.length, 0);
    const documents = attached.reduce((n, d) => n + (this.documents.get(d.id)?.text.length ?? 0), 0);
    const used = system + documents + history + draft.length;
    const total = used + this.settings.maxTokens;
    return {
      conversationId,
      maxContext: this.settings.maxContext,
      system,
      documents,
      history,
      draft: draft.length,
      reserve: this.settings.maxTokens,
      used,
      total,
      fits: total <= this.settings.maxContext,
      rope: { capacity: 1024, bytes: 65536 },
      kv: { capacity: 1024, bytes: 1 << 21 },
      outOfContext: [],
      droppedTokens: 0,
      estimated: false,
    };
  }

  private readonly handlers: { [M in MethodName]: (r: RequestOf<M>) => ResponseOf<M> } = {
    listConversations: ({ search }) =>
      [...this.conversations.values()]
        .filter((c) => !search || c.title.toLowerCase().includes(search.toLowerCase()))
        .map(({ messages: _m, ...summary }) => structuredClone(summary)),
    createConversation: ({ title }) => this.addConversation(title ?? 'New chat'),
    getConversation: ({ id }) => {
      const c = this.conversations.get(id);
      if (!c) throw new ApiError('NOT_FOUND', `no conversation ${id}`);
      const snapshot = structuredClone(c);
      this.afterConversationSnapshot?.(c);
      return snapshot;
    },
    renameConversation: ({ id, title }) => {
      const c = this.conversations.get(id)!;
      c.title = title;
      return { id, title, createdAt: c.createdAt, updatedAt: c.updatedAt };
    },
    setConversationPolicy: ({ id, policy }) => {
      const c = this.conversations.get(id);
      if (!c) throw new ApiError('NOT_FOUND', `no conversation ${id}`);
      if (policy) c.contextFullPolicy = policy;
      else delete c.contextFullPolicy;
      const { messages: _m, ...summary } = c;
      return structuredClone(summary);
    },
    setConversationThinking: ({ id, thinking }) => {
      const c = this.conversations.get(id);
      if (!c) throw new ApiError('NOT_FOUND', `no conversation ${id}`);
      if (thinking !== null) c.thinking = thinking;
      else delete c.thinking;
      const { messages: _m, ...summary } = c;
      return structuredClone(summary);
    },
    setConversationSettings: ({ id, settings }) => {
      const c = this.conversations.get(id);
      if (!c) throw new ApiError('NOT_FOUND', `no conversation ${id}`);
      if (Object.keys(settings).length) c.chatSettings = settings;
      else delete c.chatSettings;
      const { messages: _m, ...summary } = c;
      return structuredClone(summary);
    },
    deleteConversation: ({ id }) => {
      this.conversations.delete(id);
      return null;
    },
    deleteMessage: ({ conversationId, messageId }) => {
      const c = this.conversations.get(conversationId)!;
      const i = c.messages.findIndex((m) => m.id === messageId);
      let end = i + 1;
      if (c.messages[i].role === 'user') while (end < c.messages.length && c.messages[end].role !== 'user') end++;
      c.messages.splice(i, end - i);
      return structuredClone(c);
    },
    attachDocument: ({ name, data }) => {
      const text = Buffer.from(data, 'base64').toString('utf8');
      if (text.length === 0) throw new ApiError('DOCUMENT_NO_TEXT', `${name}: no text found: the file is empty`);
      const doc: DocumentText = { id: `d${this.nextId++}`, name, kind: 'text', size: text.length, hash: text, tokens: text.length, fit: 'whole', text, parts: [] };
      this.documents.set(doc.id, doc);
      const { text: _t, parts: _p, ...info } = doc;
      return info;
    },
    stopAttaching: () => null,
    openDocument: ({ id }) => {
      const d = this.documents.get(id);
      if (!d) throw new ApiError('NOT_FOUND', `no document ${id}`);
      return d;
    },
    sendMessage: ({ conversationId, content, documents }) => {
      const c = this.conversations.get(conversationId)!;
      const userMessage = this.message(conversationId, 'user', content, 'complete');
      if (documents?.length) userMessage.documents = documents.map((d) => ({ ...this.documents.get(d.id)!, fit: d.fit }));
      const assistantMessage = this.message(conversationId, 'assistant', '', 'streaming');
      c.messages.push(userMessage, assistantMessage);
      this.beforeSendAnswers?.(assistantMessage);
      return { userMessage, assistantMessage };
    },
    stopGeneration: () => null,
    regenerate: ({ conversationId }) => {
      const c = this.conversations.get(conversationId)!;
      while (c.messages.at(-1)?.role === 'assistant') c.messages.pop();
      const assistantMessage = this.message(conversationId, 'assistant', '', 'streaming');
      c.messages.push(assistantMessage);
      return { assistantMessage };
    },
    editMessage: ({ conversationId, messageId, content }) => {
      const c = this.conversations.get(conversationId)!;
      c.messages = c.messages.slice(0, c.messages.findIndex((m) => m.id === messageId));
      const userMessage = this.message(conversationId, 'user', content, 'complete');
      const assistantMessage = this.message(conversationId, 'assistant', '', 'streaming');
      c.messages.push(userMessage, assistantMessage);
      return { userMessage, assistantMessage };
    },
    continueAnswer: ({ conversationId, messageId }) => {
      const c = this.conversations.get(conversationId)!;
      const answer = c.messages.find((m) => m.id === messageId)!;
      answer.status = 'streaming';
      return { assistantMessage: structuredClone(answer) };
    },
    editAnswer: ({ conversationId, messageId, content }) => {
      const c = this.conversations.get(conversationId)!;
      const i = c.messages.findIndex((m) => m.id === messageId);
      const edited = this.message(conversationId, 'assistant', content, 'complete');
      edited.branches = [messageId, edited.id];
      c.messages = [...c.messages.slice(0, i), edited];
      return structuredClone(c);
    },
    getBudget: ({ conversationId, draft, documents }) => this.budgetOf(conversationId, draft, documents),
    getSettings: () => ({ ...this.settings }),
    updateSettings: (patch) => (this.settings = { ...this.settings, ...patch }),
    getModel: () => this.model,
    getLocalServer: () => ({ status: 'unavailable' as const, baseUrl: null, error: null }),
    listRemoteModels: () => {
      throw new Error('not in the fake');
    },
    connectRemote: () => {
      throw new Error('not in the fake');
    },
    importConversation: ({ title, messages }) => {
      const c = this.addConversation(title);
      c.messages = messages.map((m) => ({ ...this.message(c.id, m.role, m.content, m.status), stats: m.stats, error: m.error }));
      return structuredClone(c);
    },
    selectBranch: ({ conversationId, messageId }) => {
      const c = this.conversations.get(conversationId)!;
      this.onSelectBranch?.(c, messageId);
      return structuredClone(c);
    },
    /** Paths under /nowhere fail to load; any other loads as the current model. */
    openModel: ({ path }) => {
      if (path.startsWith('/nowhere')) throw new ApiError('MODEL_LOAD', `cannot read ${path}`);
      return structuredClone(this.model);
    },
    listModels: () => structuredClone(this.library),
    chooseModelFile: () => ({ available: false, path: null }),
  };

  /** What listModels answers (tests fill it). */
  library: ModelLibrary = { models: [], recent: [], roots: [], scanMs: 0 };

  asApi(): RopewalkApi {
    const api: Record<string, unknown> = {
      on: (event: EventName, listener: (data: never) => void) => {
        let set = this.listeners.get(event);
        if (!set) this.listeners.set(event, (set = new Set()));
        set.add(listener);
        return () => set.delete(listener);
      },
    };
    for (const method of Object.keys(this.handlers) as MethodName[]) {
      api[method] = async (request: unknown) => {
        this.calls.push([method, request]);
        await settle();
        const failure = this.failures.get(method);
        if (failure) {
          this.failures.delete(method);
          throw failure;
        }
        return (this.handlers[method] as (r: unknown) => unknown)(request);
      };
    }
    return api as unknown as RopewalkApi;
  }
}
