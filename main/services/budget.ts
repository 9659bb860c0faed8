/**
 * The context budget of a conversation, in tokens, counted by the engine's own tokenizer and chat
 * template (or transcript), so the meter shows exactly what the model will be fed:
 *   system    = count([system])                                   (0 without a system prompt)
 *   history   = count([system, ...history]) − system              (0 for an empty conversation)
 *   draft     = count([system, ...history, user: draft]) − system − history   (0 for no draft)
 *   documents = count(the prompt as fed) − count(the same without documents)
 *   reserve = maxTokens; used = system + documents + history + draft; total = used + reserve;
 *   fits    = total ≤ maxContext; under the rolling-window and truncate-middle policies also
 *             used < maxContext: the answer then shifts the context when it reaches the max
 *             context (the engine's context shift, context-policy.ts's SHIFT_KEEP), so only the
 *             prompt must fit, not the reserve.
 * Every count renders the template with the conversation's Think toggle (`enable_thinking`), as the
 * answer's request does.
 * The prompt as fed comes from `DocumentService.assemble`, which the answer uses too, after the
 * context-full policy has left out the oldest exchanges (`outOfContext`, and `droppedTokens` =
 * count(prompt with them) − count(prompt as fed); see context-policy.ts). The settings are the
 * conversation's (its own system prompt and sampler over the settings). A budget that does not
 * fit carries `remedies`: whether a rolling window would make it fit, the largest reply that fits.
 *
 * The renderer debounces its calls as the user types; this side protects the worker anyway:
 * concurrent requests for one conversation are coalesced (while one is counted, only the latest
 * draft waits; every waiter gets that latest result), and the system + history counts are
 * cached per conversation until the history, system prompt or model changes.
 */
import type { ContextBudget, ContextFullPolicy, Message } from '../contract/types.ts';
import type { ChatEngine } from '../engine-host/chat-engine.ts';
import type { ChatMessage } from '../engine/generate/types.ts';
import type { AssembledPrompt, DocumentService, Draft } from './documents.ts';
import { keptHistory, SHIFT_KEEP } from './context-policy.ts';
import { historyMessages, systemMessages } from './history.ts';
import type { ModelService } from './model-service.ts';
import type { SettingsService } from './settings.ts';
import type { ConversationStore } from './store.ts';

interface Counted {
  signature: string;
  counts: Promise<{ system: number; history: number }>;
}

interface Job {
  draft: string;
  documents: Draft['documents'];
  waiters: { resolve: (b: ContextBudget) => void; reject: (e: unknown) => void }[];
}

const CACHE_ENTRIES = 16;

/** Context budgets (tokens) of conversations, counted by the engine worker; see ContextBudget. */
export class BudgetService {
  private readonly counted = new Map<string, Counted>();
  private readonly queues = new Map<string, { running: boolean; next: Job | null }>();
  private readonly drafts = new Map<string, { text: string; documents: Draft['documents']; tokens: number; documentTokens: number }>();
  /** The conversation whose budget the window asked for last (null key: a new conversation). */
  private activeKey: string | null = null;

  constructor(
    private readonly engine: ChatEngine,
    private readonly store: ConversationStore,
    private readonly settings: SettingsService,
    private readonly models: ModelService,
    private readonly documents: DocumentService,
  ) {}

  /**
   * The budget of `conversationId` (null: a new, empty one) with `draft` in the composer.
   * Coalesced per conversation: a caller whose request was overtaken by a newer draft gets the
   * newer draft's budget. Waits for a model that is loading.
   * @throws ServiceError NOT_FOUND (unknown conversation), MODEL_NOT_READY (no model loaded).
   */
  getBudget(conversationId: string | null, draft: string, documents: Draft['documents'] = []): Promise<ContextBudget> {
    const key = conversationId ?? '';
    this.activeKey = key;
    let q = this.queues.get(key);
    if (!q) this.queues.set(key, (q = { running: false, next: null }));
    const queue = q;
    return new Promise((resolve, reject) => {
      if (queue.next) Object.assign(queue.next, { draft, documents });
      else queue.next = { draft, documents, waiters: [] };
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
        const b = await this.compute(key || null, job.draft, undefined, job.documents);
        for (const w of job.waiters) w.resolve(b);
      } catch (e) {
        for (const w of job.waiters) w.reject(e);
      }
    }
    q.running = false;
    this.queues.delete(key);
  }

  /** The context-full policy that applies to a conversation: its own, else the setting's (one database read). */
  policyOf(conversationId: string | null): ContextFullPolicy {
    return (conversationId !== null ? this.store.conversationPolicy(conversationId) : null) ?? this.settings.get().contextFullPolicy;
  }

  /**
   * Counts the budget now (no coalescing). `messages` overrides the stored history (regenerate
   * and edit check the history they are about to use); `documents` are attached to the draft.
   */
  async compute(conversationId: string | null, draft: string, messages?: readonly Message[], documents: Draft['documents'] = []): Promise<ContextBudget> {
    return (await this.prepare(conversationId, draft, messages, documents)).budget;
  }

  /**
   * The prompt that would be fed (system, history, draft, documents in their turns) and its
   * budget, from one assembly, so what is counted is what is generated from; and `contextShift`,
   * the engine's shift for the policy counted under (SHIFT_KEEP), so the answer uses that policy
   * without reading it again.
   *   documents = count(prompt) − count(prompt without documents); draft and history exclude them.
   * @throws ServiceError NOT_FOUND, MODEL_NOT_READY.
   */
  async prepare(
    conversationId: string | null,
    draft: string,
    messages?: readonly Message[],
    documents: Draft['documents'] = [],
  ): Promise<{ budget: ContextBudget; prompt: AssembledPrompt; contextShift: (typeof SHIFT_KEEP)[ContextFullPolicy] }> {
    await this.models.ready();
    this.models.assertLoaded();
    const key = conversationId ?? '';
    const s = this.settings.forConversation(conversationId);
    const stored = messages ?? (conversationId ? this.store.getConversation(conversationId).messages : []);
    const system = systemMessages(s.systemPrompt);
    const hasDraft = draft.length > 0 || documents.length > 0;
    const pending = hasDraft ? { content: draft, documents } : null;
    const room = s.maxContext - s.maxTokens;
    // The Think toggle changes the prompt (Qwen3's closes an empty block when it is off): counted as the answer sends it.
    const thinking = conversationId ? this.store.conversationThinking(conversationId) : null;
    const think = thinking !== null ? { enableThinking: thinking } : {};
    // A prompt with whole documents of megabytes that surely do not fit is measured, not counted (DocumentService.assemble).
    const count = async (p: AssembledPrompt) => (p.measured ? (await this.engine.countTokens({ messages: p.measured.messages, ...think })) + p.measured.tokens : this.engine.countTokens({ messages: p.messages, ...think }));
    let prompt = await this.documents.assemble(system, stored, pending, room);
    // The context-full policy leaves out the oldest exchanges (never the system prompt).
    let kept: readonly Message[] = stored;
    let dropped: Message[] = [];
    // The count of `prompt` as fed, when already known (a policy other than stop counts it first).
    let fedCount: number | null = null;
    const policy = this.policyOf(conversationId);
    // The count of the prompt with the whole history, when some of it is left out.
    let wholeCount = 0;
    // Only a regenerate (`messages` given, no draft) answers the last exchange again, so only then
    // must it stay: the meter's empty draft counts what the next message would send, for which
    // the last exchange is history like the others (issue 19: under a rolling window an empty
    // draft read 538 / 512 and was refused, until one typed).
    const protectLast = !hasDraft && messages !== undefined;
    if (policy !== 'stop' && stored.length > 0 && (fedCount = await count(prompt)) > room) {
      const fitsWith = async (k: Message[]) => (await count(await this.documents.assemble(system, k, pending, room))) <= room;
      ({ kept, dropped } = await keptHistory(policy, stored, protectLast, fitsWith));
      if (dropped.length) {
        wholeCount = fedCount;
        prompt = await this.documents.assemble(system, kept, pending, room);
        fedCount = null;
      }
    }
    const plainHistory = historyMessages(kept);
    const { system: sys, history: hist } = await this.countHistory(key, system, plainHistory, think);
    // The plain prompt (no documents) with the draft's turn, then the prompt as fed.
    const plainAll = hasDraft && prompt.plain.some((m) => m.content.length > 0) ? await this.engine.countTokens({ messages: prompt.plain, ...think }) : sys + hist;
    const withDocuments = kept.some((m) => m.documents?.length) || documents.length > 0;
    const all = withDocuments ? (fedCount ?? (await count(prompt))) : plainAll;
    const draftTokens = hasDraft ? Math.max(0, plainAll - sys - hist) : 0;
    const documentTokens = Math.max(0, all - plainAll);
    if (!messages) this.drafts.set(key, { text: draft, documents, tokens: draftTokens, documentTokens });
    const caches = await this.engine.stats();
    const budget = assemble(conversationId, s.maxContext, s.maxTokens, sys, documentTokens, hist, draftTokens, {
      rope: { capacity: caches.rope.capacity, bytes: caches.rope.bytes },
      kv: { capacity: caches.kv.capacity, bytes: caches.kv.bytes },
      outOfContext: dropped.map((m) => m.id),
      droppedTokens: dropped.length ? Math.max(0, wholeCount - all) : 0,
      estimated: this.engine.countAccuracy === 'estimate' || prompt.measured !== null,
    }, SHIFT_KEEP[policy] !== false);
    if (!budget.fits) budget.remedies = await this.remedies(budget, system, pending, room, count);
    return { budget, prompt, contextShift: SHIFT_KEEP[policy] };
  }

  /**
   * What would make a budget that does not fit fit (ContextBudget.remedies): a rolling window
   * when the system prompt and the pending message alone fit under it (one more count: the
   * prompt without history, its room the max context, as the rolling window needs), and the
   * largest reply reserve that fits: maxContext − used, when that is at least 1 and below the
   * reserve (under a policy that shifts, `used` itself is at the max, so none).
   */
  private async remedies(
    b: ContextBudget,
    system: ChatMessage[],
    pending: Draft | null,
    room: number,
    count: (p: AssembledPrompt) => Promise<number>,
  ): Promise<NonNullable<ContextBudget['remedies']>> {
    const alone = pending ? await count(await this.documents.assemble(system, [], pending, room)) : b.system;
    const shorter = b.maxContext - b.used;
    return { rollingWindow: alone < b.maxContext, shorterReply: shorter >= 1 && shorter < b.reserve && b.total > b.maxContext ? shorter : null };
  }

  /**
   * A cheap estimate while an answer streams: `base` (counted when it started) with the
   * history grown by the tokens generated so far and the latest draft's count. No worker call,
   * no database read: `shifts` is the streaming answer's own (its request's `contextShift`,
   * resolved from the policy when it started).
   */
  estimate(base: ContextBudget, generatedTokens: number, shifts: boolean): ContextBudget {
    const d = this.drafts.get(base.conversationId ?? '');
    const draft = d?.tokens ?? base.draft;
    // An answer that shifts the context holds at most the max context: what passes it was dropped.
    const grown = base.system + base.documents + base.history + generatedTokens + draft;
    const over = shifts ? Math.max(0, grown - base.maxContext) : 0;
    const b = assemble(base.conversationId, base.maxContext, base.reserve, base.system, base.documents, base.history + generatedTokens - over, draft, {
      rope: base.rope,
      kv: base.kv,
      outOfContext: base.outOfContext,
      droppedTokens: base.droppedTokens + over,
      estimated: base.estimated,
    }, shifts);
    // Shifting, the answer goes on at the max context; the exact count at its end says whether the next message fits.
    return over > 0 ? { ...b, fits: true } : b;
  }

  /** The draft (text and attached documents) last counted for a conversation (empty if none). */
  lastDraft(conversationId: string | null): Draft {
    const d = this.drafts.get(conversationId ?? '');
    return { content: d?.text ?? '', documents: d?.documents ?? [] };
  }

  /** Forgets the draft of a conversation (it was sent). */
  clearDraft(conversationId: string): void {
    this.drafts.set(conversationId, { text: '', documents: [], tokens: 0, documentTokens: 0 });
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
  private countHistory(key: string, system: ChatMessage[], history: ChatMessage[], think: { enableThinking?: boolean }): Promise<{ system: number; history: number }> {
    const signature = `${this.engine.model?.bundleDir ?? ''}\u0000${JSON.stringify(system)}\u0000${JSON.stringify(history)}\u0000${think.enableThinking ?? ''}`;
    const hit = this.counted.get(key);
    if (hit && hit.signature === signature) return hit.counts;
    const counts = (async () => {
      const sys = system.length ? await this.engine.countTokens({ messages: system, ...think }) : 0;
      const hist = history.length ? Math.max(0, (await this.engine.countTokens({ messages: [...system, ...history], ...think })) - sys) : 0;
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
  documents: number,
  history: number,
  draft: number,
  caches: Pick<ContextBudget, 'rope' | 'kv' | 'outOfContext' | 'droppedTokens' | 'estimated'>,
  /** The answer may shift the context (rolling window, truncate middle): only the prompt must fit. */
  shifts: boolean,
): ContextBudget {
  const used = system + documents + history + draft;
  const total = used + reserve;
  const fits = total <= maxContext || (shifts && used < maxContext);
  return { conversationId, maxContext, system, documents, history, draft, reserve, used, total, fits, ...caches };
}
