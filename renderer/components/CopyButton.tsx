/**
 * A button that copies text to the clipboard and says "Copied" for a moment. Uses the async
 * Clipboard API (the app's origins are secure contexts) and falls back to a hidden textarea.
 */
import { useEffect, useRef, useState } from 'react';
import { CheckIcon, CopyIcon } from './icons.tsx';

async function copyText(text: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const area = document.createElement('textarea');
    area.value = text;
    area.setAttribute('readonly', '');
    area.className = 'offscreen';
    document.body.append(area);
    area.select();
    const ok = document.execCommand('copy');
    area.remove();
    return ok;
  }
}

export function CopyButton({ text, label, className }: { text: () => string; label: string; className?: string }) {
  const [copied, setCopied] = useState(false);
  const timer = useRef<number | null>(null);
  useEffect(() => () => void (timer.current !== null && window.clearTimeout(timer.current)), []);
  return (
    <button
      type="button"
      className={className ?? 'btn btn-ghost btn-xs'}
      aria-label={copied ? 'Copied' : label}
      title={label}
      onClick={async () => {
        if (!(await copyText(text()))) return;
        setCopied(true);
        if (timer.current !== null) window.clearTimeout(timer.current);
        timer.current = window.setTimeout(() => setCopied(false), 1500);
      }}
    >
      {copied ? <CheckIcon size={14} /> : <CopyIcon size={14} />}
      <span>{copied ? 'Copied' : label}</span>
    </button>
  );
}
