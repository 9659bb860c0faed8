/**
 * The context budget of a conversation, in tokens, counted by the engine's own tokenizer and chat
 * template (or transcript), so the meter shows exactly what the model will be fed:
 *   system  = count([system])                                   (0 without a system prompt)
 *   history = count([system, ...history]) − system              (0 for an empty conversation)
 *   draft   = count([system, ...history, user: draft]) − system − history   (0 for no draft)
 *   reserve = maxTokens; used = system + history + draft; total = used + reserve;
 *   fits    = total ≤ maxContext.
 *
 * The renderer debounces its calls as the user types; this side protects the worker anyway:
 * concurrent requests for one conversation are coalesced (while one is counted, only the latest
 * draft waits; every waiter gets that latest result), and the system + history counts are
 * cached per conversation until the history, system prompt or model changes.
 */
import type { ContextBudget, Message } from '../contract/types.ts';
import type { EngineHost } from '../engine-host/host.ts';
import type { ChatMessage } from '../engine/generate/types.ts';
import type { ModelService } from './model-service.ts';
import type { SettingsService } from './settings.ts';
import type { ConversationStore } from './store.ts';

/**
 * The conversation as the model sees it: user messages and non-empty assistant answers (whatever
 * their status; an error answer with no text is skipped). Consecutive messages of one role (a
 * user message whose answer failed, then another) are joined with a newline, so chat templates
 * that require alternating roles accept the history; a transcript renders the same text.
 */
export function historyMessages(messages: readonly Message[]): ChatMessage[] {
  const out: ChatMessage[] = [];
  for (const m of messages) {
    if (m.role === 'system') continue;
    if (m.role === 'assistant' && m.content.length === 0) continue;
    const last = out[out.length - 1];
    if (last && last.role === m.role) last.content += (m.role === 'user' ? '\n' : '') + m.content;
    else out.push({ role: m.role, content: m.content });
  }
  return out;
}

/** The system message list for a system prompt ([] when empty). */
export function systemMessages(systemPrompt: string): ChatMessage[] {
  return systemPrompt.length > 0 ? [{ role: 'system', content: systemPrompt }] : [];
}

interface Counted {
  signature: string;
  counts: Promise<{ system: number; history: number }>;
}

interface Job {
  draft: string;
  waiters: { resolve: (b: ContextBudget) => void; reject: (e: unknown) => void }[];
}

const CACHE_ENTRIES = 16;

/** Context budgets (tokens) of conversations, counted by the engine worker; see ContextBudget. */
export class BudgetService {
  private readonly counted = new Map<string, Counted>();
  private readonly queues = new Map<string, { running: boolean; next: Job | null }>();
  private readonly drafts = new Map<string, { text: string; tokens: number }>();
  /** The conversation whose budget the window asked for last (null key: a new conversation). */
  private activeKey: string | null = null;

  constructor(
    private readonly host: EngineHost,
    private readonly store: ConversationStore,
    private readonly settings: SettingsService,
    private readonly models: ModelService,
  ) {}

  /**
   * The budget of `conversationId` (null: a new, empty one) with `draft` in the composer.
   * Coalesced per conversation: a caller whose request was overtaken by a newer draft gets the
   * newer draft's budget. Waits for a model that is loading.
   * @throws ServiceError NOT_FOUND (unknown conversation), MODEL_NOT_READY (no model loaded).
   */
  getBudget(conversationId: string | null, draft: string): Promise<ContextBudget> {
    const key = conversationId ?? '';
    this.activeKey = key;
    let q = this.queues.get(key);
    if (!q) this.queues.set(key, (q = { running: false, next: null }));
    const queue = q;
    return new Promise((resolve, reject) => {
      if (queue.next) queue.next.draft = draft;
      else queue.next = { draft, waiters: [] };
      queue.next.waiters.push({ resolve, reject });
      if (!queue.running) void this.drain(key, queue);
    });
  }

  private async drain(key: string, q: { running: boolean; next: Job | null }): Promise<void> {
    q.running = true;
    while (q.next) {
      const job = q.next;
      q.next = null;
      try {
        const b = await this.compute(key || null, job.draft);
        for (const w of job.waiters) w.resolve(b);
      } catch (e) {
        for (const w of job.waiters) w.reject(e);
      }
    }
    q.running = false;
    this.queues.delete(key);
  }

  /**
   * Counts the budget now (no coalescing). `messages` overrides the stored history (regenerate
   * and edit check the history they are about to use).
   */
  async compute(conversationId: string | null, draft: string, messages?: readonly Message[]): Promise<ContextBudget> {
    await this.models.ready();
    this.models.assertLoaded();
    const key = conversationId ?? '';
    const s = this.settings.get();
    const history = historyMessages(messages ?? (conversationId ? this.store.getConversation(conversationId).messages : []));
    const system = systemMessages(s.systemPrompt);
    const { system: sys, history: hist } = await this.countHistory(key, system, history);
    let draftTokens = 0;
    if (draft.length > 0) {
      const all = await this.host.countTokens({ messages: [...system, ...history, { role: 'user', content: draft }] });
      draftTokens = Math.max(0, all - sys - hist);
    }
    if (!messages) this.drafts.set(key, { text: draft, tokens: draftTokens });
    const caches = await this.host.stats();
    return assemble(conversationId, s.maxContext, s.maxTokens, sys, hist, draftTokens, {
      rope: { capacity: caches.rope.capacity, bytes: caches.rope.bytes },
      kv: { capacity: caches.kv.capacity, bytes: caches.kv.bytes },
    });
  }

  /**
   * A cheap estimate while an answer streams: `base` (counted when it started) with the
   * history grown by the tokens generated so far and the latest draft's count. No worker call.
   */
  estimate(base: ContextBudget, generatedTokens: number): ContextBudget {
    const draft = this.drafts.get(base.conversationId ?? '')?.tokens ?? base.draft;
    return assemble(base.conversationId, base.maxContext, base.reserve, base.system, base.history + generatedTokens, draft, { rope: base.rope, kv: base.kv });
  }

  /** The draft text last counted for a conversation ('' if none). */
  lastDraft(conversationId: string | null): string {
    return this.drafts.get(conversationId ?? '')?.text ?? '';
  }

  /** Forgets the draft of a conversation (it was sent). */
  clearDraft(conversationId: string): void {
    this.drafts.set(conversationId, { text: '', tokens: 0 });
  }

  /** The conversation the window looked at last (undefined: none yet), for recounts after a settings change. */
  get active(): { conversationId: string | null } | undefined {
    return this.activeKey === null ? undefined : { conversationId: this.activeKey || null };
  }

  /** Forgets everything about a deleted conversation. */
  forget(conversationId: string): void {
    this.counted.delete(conversationId);
    this.drafts.delete(conversationId);
    if (this.activeKey === conversationId) this.activeKey = null;
  }

  /**
   * Token counts of the system prompt and the history, cached per conversation by content; the
   * cache holds the in-flight promise, so overlapping requests (the server's recount after an
   * answer and the window's refresh) tokenize once. A failure is not cached.
   */
  private countHistory(key: string, system: ChatMessage[], history: ChatMessage[]): Promise<{ system: number; history: number }> {
    const signature = `${this.host.model?.bundleDir ?? ''}\u0000${JSON.stringify(system)}\u0000${JSON.stringify(history)}`;
    const hit = this.counted.get(key);
    if (hit && hit.signature === signature) return hit.counts;
    const counts = (async () => {
      const sys = system.length ? await this.host.countTokens({ messages: system }) : 0;
      const hist = history.length ? Math.max(0, (await this.host.countTokens({ messages: [...system, ...history] })) - sys) : 0;
      return { system: sys, history: hist };
    })();
    this.counted.delete(key);
    this.counted.set(key, { signature, counts });
    if (this.counted.size > CACHE_ENTRIES) this.counted.delete(this.counted.keys().next().value!);
    counts.catch(() => {
      if (this.counted.get(key)?.counts === counts) this.counted.delete(key);
    });
    return counts;
  }
}

function assemble(
  conversationId: string | null,
  maxContext: number,
  reserve: number,
  system: number,
  history: number,
  draft: number,
  caches: Pick<ContextBudget, 'rope' | 'kv'>,
): ContextBudget {
  const used = system + history + draft;
  const total = used + reserve;
  return { conversationId, maxContext, system, history, draft, reserve, used, total, fits: total <= maxContext, ...caches };
}
