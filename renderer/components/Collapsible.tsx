/**
 * A long message, cut after a few screens (CSS: `.collapse-limited`, max-height 250vh) with a
 * "Show all" button, and "Show less" once open. Whether the text overflows is measured after
 * layout (so a short message gets no button at any width); an answer still streaming is never
 * cut (the view follows its end).
 */
import { useLayoutEffect, useRef, useState, type ReactNode } from 'react';

export function Collapsible({ text, enabled, children }: { text: string; enabled: boolean; children: ReactNode }) {
  const body = useRef<HTMLDivElement>(null);
  const [expanded, setExpanded] = useState(false);
  const [overflows, setOverflows] = useState(false);
  const limited = enabled && !expanded;

  useLayoutEffect(() => {
    const el = body.current;
    if (el && limited) setOverflows(el.scrollHeight > el.clientHeight + 1);
  }, [text, limited]);

  return (
    <div className={`collapse${limited ? ' collapse-limited' : ''}${limited && overflows ? ' collapse-cut' : ''}`}>
      <div className="collapse-body" ref={body}>
        {children}
      </div>
      {enabled && (overflows || expanded) && (
        <button type="button" className="btn btn-ghost btn-xs collapse-toggle" aria-expanded={expanded} onClick={() => setExpanded(!expanded)}>
          {expanded ? 'Show less' : 'Show all'}
        </button>
      )}
    </div>
  );
}
