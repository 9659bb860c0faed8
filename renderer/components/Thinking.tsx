/**
 * A reasoning model's thinking in the window. `ThinkingBlock`: a collapsible "Thinking" block
 * above the answer (a button that says whether it is open, `aria-expanded`, over a region): open
 * while the model thinks, collapsed once the answer starts (as LM Studio, Jan and llama.cpp's
 * web UI do), then "Thought for 1.2 s · 140 tokens" from the answer's stats; the person's own
 * open/close wins from then on. The text is shown as plain text (pre-wrap), never as HTML.
 * `ThinkToggle`: the open chat's "Think" checkbox, shown only for a model whose chat template
 * reads `enable_thinking` (Qwen3); unset, it shows the template's default (thinking on).
 */
import { useState } from 'react';
import type { AnswerStats } from '../../main/contract/types.ts';
import { useChat, useConversations, useModel, useStores } from '../hooks.ts';
import { formatTokens } from '../lib/meter.ts';
import { summaryById } from '../stores/conversations.ts';

/** The block's title: "Thinking…" while it is written, then its duration and tokens when the stats say them. */
export function thinkingTitle(thinking: boolean, stats: AnswerStats | null): string {
  if (thinking) return 'Thinking…';
  if (!stats?.reasoningTokens) return 'Thoughts';
  const ms = stats.reasoningMs ?? 0;
  const time = ms >= 10_000 ? `${Math.round(ms / 1000)} s` : `${(ms / 1000).toFixed(1)} s`;
  return `Thought for ${time} · ${formatTokens(stats.reasoningTokens)} ${stats.reasoningTokens === 1 ? 'token' : 'tokens'}`;
}

export function ThinkingBlock({ id, reasoning, thinking, stats }: { id: string; reasoning: string; thinking: boolean; stats: AnswerStats | null }) {
  const [chosen, setChosen] = useState<boolean | null>(null);
  const open = chosen ?? thinking;
  const region = `thinking-${id}`;
  return (
    <div className={`thinking${thinking ? ' live' : ''}`}>
      <button type="button" className="thinking-toggle" aria-expanded={open} aria-controls={region} onClick={() => setChosen(!open)}>
        <span className="thinking-caret" aria-hidden="true">
          {open ? '▾' : '▸'}
        </span>
        <span>{thinkingTitle(thinking, stats)}</span>
      </button>
      {open && (
        <div className="thinking-text" id={region} role="region" aria-label="Thinking">
          {reasoning}
        </div>
      )}
    </div>
  );
}

export function ThinkToggle() {
  const stores = useStores();
  const offered = useModel((s) => s.model?.info?.thinkingToggle === true && !s.model.info.remote);
  const conversationId = useChat((s) => s.conversationId);
  const own = useConversations((s) => summaryById(s, conversationId)?.thinking);
  if (!offered || conversationId === null) return null;
  const on = own ?? true;
  return (
    <label className="think-toggle" title="Let the model think before it answers (its template's enable_thinking)">
      <input type="checkbox" checked={on} onChange={(e) => void stores.conversations.getState().setThinking(conversationId, e.target.checked)} />
      <span>Think</span>
    </label>
  );
}
