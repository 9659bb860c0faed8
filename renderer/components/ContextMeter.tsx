/**
 * The context meter: tokens used (system + documents + history + draft) against the max context,
 * as a segmented bar (system, documents, history, draft, reserved for the reply) and
 * `1,234 / 2,048` — what will be sent: under a policy that leaves messages out, the kept part,
 * with `(166 dropped)` for the tokens left out — and how many messages the policy leaves out.
 * role=meter with aria-valuenow = used and aria-valuemax = max context; amber from 80 %, red
 * when the next message will not fit. Hover or focus shows the breakdown and the RoPE and KV
 * cache capacity and bytes. Counts that are an estimate (a remote engine that cannot count
 * exactly) are marked "≈", in the text, the label and the tooltip.
 */
import type { ContextBudget } from '../../main/contract/types.ts';
import { useBudget, useSettings } from '../hooks.ts';
import { droppedText, formatBytes, formatTokens, meterLevel, meterSegments, meterText, percentUsed, type MeterInput } from '../lib/meter.ts';

export function ContextMeter() {
  const budget = useBudget((s) => s.budget);
  const maxContext = useSettings((s) => s.settings?.maxContext ?? 0);
  const maxTokens = useSettings((s) => s.settings?.maxTokens ?? 0);
  // Until the first getBudget answers, an empty conversation under the saved settings.
  const b: MeterInput & Partial<Pick<ContextBudget, 'rope' | 'kv' | 'outOfContext' | 'droppedTokens' | 'estimated'>> = budget ?? {
    maxContext,
    system: 0,
    documents: 0,
    history: 0,
    draft: 0,
    reserve: maxTokens,
    used: 0,
    total: maxTokens,
    fits: maxTokens <= maxContext,
  };
  const level = meterLevel(b);
  const segments = meterSegments(b);
  const pct = percentUsed(b.used, b.maxContext);
  const out = b.outOfContext?.length ?? 0;
  const about = b.estimated ? 'about ' : '';
  const dropped = droppedText(b.droppedTokens);

  return (
    <div className={`meter-wrap meter-${level}`}>
      <div
        className="meter"
        role="meter"
        aria-label="Context used"
        aria-valuemin={0}
        aria-valuemax={b.maxContext}
        aria-valuenow={b.used}
        aria-valuetext={`${about}${formatTokens(b.used)} of ${formatTokens(b.maxContext)} tokens${dropped}`}
        aria-describedby="context-meter-tip"
        tabIndex={0}
      >
        <span className="meter-bar" aria-hidden="true">
          {segments.map((s) =>
            s.percent > 0 ? <span key={s.key} className={`meter-seg seg-${s.key}`} style={{ width: `${s.percent}%` }} /> : null,
          )}
        </span>
        <span className="meter-text">
          {meterText(b.used, b.maxContext, b.estimated)}
          {dropped}
        </span>
      </div>
      {out > 0 && (
        <span className="meter-out" title="Messages the context-full policy leaves out of the prompt">
          {out} {out === 1 ? 'message' : 'messages'} out of context
        </span>
      )}
      <div className="meter-tip" role="tooltip" id="context-meter-tip">
        <div className="tip-title">
          Context {meterText(b.used, b.maxContext, b.estimated)} tokens ({pct}%){dropped}
        </div>
        {b.estimated && <div className="tip-note">An estimate (≈): the remote engine has no tokenize endpoint and no tokenizer.json was given.</div>}
        <table>
          <tbody>
            {segments.map((s) => (
              <tr key={s.key}>
                <th scope="row">
                  <span className={`swatch seg-${s.key}`} aria-hidden="true" />
                  {s.label}
                </th>
                <td>{formatTokens(s.tokens)}</td>
              </tr>
            ))}
            <tr className="tip-total">
              <th scope="row">With the reply</th>
              <td>
                {formatTokens(b.total)} / {formatTokens(b.maxContext)}
              </td>
            </tr>
            <tr className="tip-cache">
              <th scope="row">RoPE cache</th>
              <td>{b.rope ? `${formatTokens(b.rope.capacity)} positions · ${formatBytes(b.rope.bytes)}` : '—'}</td>
            </tr>
            <tr>
              <th scope="row">KV cache</th>
              <td>{b.kv ? `${formatTokens(b.kv.capacity)} positions · ${formatBytes(b.kv.bytes)}` : '—'}</td>
            </tr>
          </tbody>
        </table>
      </div>
    </div>
  );
}
