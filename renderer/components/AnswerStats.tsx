/**
 * An answer's numbers: the live line while it streams ("Reading prompt n/total", then the tokens
 * so far and the decode speed so far, tokens/s, from the services' answerDelta events) and, once
 * it has ended, its stats (TTFT, tokens/s, tokens, reused from the KV cache, finish reason, the
 * document parts used, each a link to its passage in the reader) with the full figures as the tooltip.
 */
import { Fragment } from 'react';
import { contextShiftNote } from '../../main/contract/context-full.ts';
import type { AnswerStats } from '../../main/contract/types.ts';
import { formatTokens } from '../lib/meter.ts';
import { useStores } from '../hooks.ts';
import type { LiveAnswer } from '../stores/chat.ts';

/** Tokens/s as the stats show it: one decimal below 100, none from 100. */
export function formatRate(perSec: number): string {
  return perSec.toFixed(perSec >= 100 ? 0 : 1);
}

/** While an answer streams: waiting, reading the prompt, or the tokens so far and their speed. */
export function LiveLine({ live, hasText }: { live: LiveAnswer | undefined; hasText: boolean }) {
  const prefill = live?.prefill;
  if (live?.waiting && !prefill && !hasText) {
    return (
      <div className="live-line" role="status">
        <span>Waiting for {live.waiting === 1 ? 'another request' : `${live.waiting} other requests`} to finish (Stop cancels)</span>
      </div>
    );
  }
  if (prefill && !hasText) {
    const pct = prefill.total > 0 ? Math.round((prefill.processed / prefill.total) * 100) : 0;
    return (
      <div className="live-line" role="status">
        <span>
          Reading prompt {formatTokens(prefill.processed)}/{formatTokens(prefill.total)}
        </span>
        <span className="live-bar" aria-hidden="true">
          <span style={{ width: `${pct}%` }} />
        </span>
      </div>
    );
  }
  return (
    <div className="live-line" role="status">
      <span className="typing" aria-hidden="true">
        <i />
        <i />
        <i />
      </span>
      <span>{live && live.generatedTokens > 0 ? `${formatTokens(live.generatedTokens)} tokens` : 'Thinking…'}</span>
      {live?.tokensPerSec !== undefined && <span className="live-rate">{formatRate(live.tokensPerSec)} tok/s</span>}
    </div>
  );
}

export const FINISH_LABELS: Record<AnswerStats['finishReason'], string> = {
  stop: 'the model ended its answer',
  length: 'the answer reached max new tokens',
  'context-full': 'the conversation reached the max context',
  cancelled: 'stopped by you',
  error: 'the answer failed',
};

/** "Used: …": the parts of documents the prompt held, each a link to its passage in the reader when its range is known. */
function UsedParts({ stats }: { stats: AnswerStats }) {
  const stores = useStores();
  const parts = stats.documentParts ?? [];
  return (
    <span className="stats-parts">
      Used:{' '}
      {parts.map((p, i) => {
        const r = stats.documentRanges?.[i];
        return (
          <Fragment key={i}>
            {i > 0 ? '; ' : ''}
            {r ? (
              <button type="button" className="link-btn" title="Open this part in the reader" onClick={() => void stores.chat.getState().openDocument(r.documentId, { start: r.start, end: r.end })}>
                {p}
              </button>
            ) : (
              p
            )}
          </Fragment>
        );
      })}
    </span>
  );
}

export function Stats({ stats }: { stats: AnswerStats }) {
  if (stats.generatedTokens === 0) {
    // No token: TTFT and tokens/s have nothing to measure ("TTFT 0 ms · 0.0 tok/s" would lie).
    const what = stats.finishReason === 'cancelled' ? 'stopped before the first token' : `${FINISH_LABELS[stats.finishReason]} before the first token`;
    return (
      <span className="stats" title={statsTitle(stats)}>
        <span className={`finish finish-${stats.finishReason}`}>{what}</span>
      </span>
    );
  }
  const tokPerSec = formatRate(stats.decodeTokensPerSec);
  // The chip is a short label; the sentence (the CLI's words too) is its tooltip and the stats' last line.
  const shiftNote = contextShiftNote(stats.contextShift);
  return (
    <span className="stats" title={statsTitle(stats)}>
      <span>TTFT {formatTokens(stats.ttftMs)} ms</span>
      <span>{tokPerSec} tok/s</span>
      <span>{formatTokens(stats.generatedTokens)} tokens</span>
      {stats.reusedTokens > 0 && <span className="stats-reused">{formatTokens(stats.reusedTokens)} reused</span>}
      {shiftNote && (
        <span className="stats-shifted" title={shiftNote}>
          context shifted
        </span>
      )}
      <span className={`finish finish-${stats.finishReason}`}>{stats.finishReason}</span>
      {stats.documentParts && stats.documentParts.length > 0 && <UsedParts stats={stats} />}
    </span>
  );
}

function statsTitle(s: AnswerStats): string {
  if (s.generatedTokens === 0) {
    return [`Finish reason: ${s.finishReason} (${FINISH_LABELS[s.finishReason]})`, `Prompt tokens: ${formatTokens(s.promptTokens)} (${formatTokens(s.reusedTokens)} reused from the cache)`].join('\n');
  }
  return [
    `Finish reason: ${s.finishReason} (${FINISH_LABELS[s.finishReason]})`,
    `Time to first token: ${s.ttftMs.toFixed(0)} ms`,
    `Decode: ${s.decodeTokensPerSec.toFixed(1)} tokens/s`,
    `Prefill: ${s.prefillTokensPerSec.toFixed(1)} tokens/s`,
    `Prompt tokens: ${formatTokens(s.promptTokens)} (${formatTokens(s.reusedTokens)} reused from the cache)`,
    `Generated tokens: ${formatTokens(s.generatedTokens)}`,
  ]
    .concat(s.executionProvider ? [`Execution provider: ${s.executionProvider}${s.nodesOnCpu != null && s.executionProvider !== 'cpu' ? ` (${formatTokens(s.nodesOnCpu)} nodes on the CPU)` : ''}`] : [])
    .concat(contextShiftNote(s.contextShift) ?? [])
    .join('\n');
}
