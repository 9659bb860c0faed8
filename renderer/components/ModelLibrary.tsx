/**
 * "My models": the models on this machine as the library lists them (the built-in model first,
 * marked as the tiny children's-story model it is; then Ropewalk's folder, LM Studio, Ollama,
 * Jan, the Hugging Face cache), each with architecture, quantization, parameters, size, trained
 * context and whether it fits this machine's memory at the max context the load would use, and
 * an Open button; the recent models above; a Refresh button; in the desktop app a "Browse…"
 * button (the native file dialog); the Models folder setting (Ropewalk's own folder). Opening goes through the model store (progress and errors at
 * the model card and the path field). Names and paths are text, never HTML.
 */
import { useShallow } from 'zustand/react/shallow';
import type { LibraryModel, LibrarySource } from '../../main/contract/library.ts';
import { getConnection } from '../api.ts';
import { useEffect, useState } from 'react';
import { useLibrary, useModel, useSettings, useStores } from '../hooks.ts';
import { formatBytes, formatTokens } from '../lib/meter.ts';

const SOURCE_LABEL: Record<LibrarySource, string> = {
  builtin: 'Built-in',
  ropewalk: 'Ropewalk',
  lmstudio: 'LM Studio',
  ollama: 'Ollama',
  jan: 'Jan',
  huggingface: 'Hugging Face',
};

/** What the built-in model is, where it is listed and on first start. */
export const BUILTIN_NOTE = "A tiny model (260K parameters) trained on children's stories: it continues a story, it does not answer questions.";

/** 292800 → "293K", 7.6e9 → "7.6B". */
export function formatParams(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(n >= 1e10 ? 0 : 1)}B`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(n >= 1e7 ? 0 : 1)}M`;
  if (n >= 1e3) return `${Math.round(n / 1e3)}K`;
  return String(n);
}

export function ModelLibrary() {
  const stores = useStores();
  const { library, scanning, error } = useLibrary(useShallow((s) => ({ library: s.library, scanning: s.scanning, error: s.error })));
  const busy = useModel((s) => s.opening || s.model?.status === 'loading');
  const open = (path: string) => void stores.model.getState().open(path);
  const browse = async () => {
    const path = await stores.library.getState().choose();
    if (path) open(path);
  };
  const recent = (library?.recent ?? []).slice(0, 5);
  const missing = library?.roots.filter((r) => r.found).length === 1;

  return (
    <section className="panel-section library" aria-labelledby="library-heading">
      <h2 id="library-heading">
        My models
        <span className="library-actions">
          {getConnection() === null && (
            <button type="button" className="btn btn-secondary btn-sm" onClick={() => void browse()} disabled={busy}>
              Browse…
            </button>
          )}
          <button type="button" className="btn btn-secondary btn-sm" onClick={() => void stores.library.getState().refresh()} disabled={scanning}>
            {scanning ? 'Scanning…' : 'Refresh'}
          </button>
        </span>
      </h2>
      {error && <p className="field-error">{error}</p>}
      {recent.length > 0 && (
        <div className="library-recent">
          <h3>Recent</h3>
          <ul>
            {recent.map((r) => (
              <li key={r.path}>
                <button type="button" className="link-btn" title={r.path} onClick={() => open(r.path)} disabled={busy}>
                  {r.name}
                </button>
              </li>
            ))}
          </ul>
        </div>
      )}
      <ul className="library-list" aria-label="Models on this computer">
        {library?.models.map((m) => <LibraryRow key={`${m.source}:${m.path}:${m.name}`} model={m} busy={busy} onOpen={open} />)}
      </ul>
      <ModelsFolderField placeholder={library?.roots.find((r) => r.source === 'ropewalk')?.path ?? ''} />
      {library && (
        <p className="field-hint library-roots">
          {missing ? 'No other app’s models were found. ' : ''}Looked in {library.roots.filter((r) => r.found).map((r) => SOURCE_LABEL[r.source]).join(', ') || 'no folder'}
          {` (${library.scanMs} ms). Put models in `}
          <code>{library.roots.find((r) => r.source === 'ropewalk')?.path}</code>, or type a path below.
        </p>
      )}
    </section>
  );
}

/** Settings `modelsFolder`: Ropewalk's own models folder ('' = the default, shown as the placeholder); saved on blur or Enter, then listed. */
function ModelsFolderField({ placeholder }: { placeholder: string }) {
  const stores = useStores();
  const stored = useSettings((s) => s.settings?.modelsFolder ?? '');
  const [value, setValue] = useState(stored);
  useEffect(() => setValue(stored), [stored]);
  const save = async () => {
    const next = value.trim();
    if (next === stored) return;
    if (await stores.settings.getState().update({ modelsFolder: next })) await stores.library.getState().refresh();
  };
  return (
    <div className="field">
      <label htmlFor="setting-models-folder">Models folder</label>
      <input
        id="setting-models-folder"
        type="text"
        spellCheck={false}
        placeholder={placeholder}
        value={value}
        onChange={(e) => setValue(e.target.value)}
        onBlur={() => void save()}
        onKeyDown={(e) => e.key === 'Enter' && void save()}
      />
    </div>
  );
}

/** A name with a line-break opportunity after each `/` (LM Studio and Hugging Face names are paths). */
function breakable(name: string) {
  return name.split('/').map((part, i, all) => (
    <span key={i}>
      {part}
      {i < all.length - 1 && (
        <>
          /<wbr />
        </>
      )}
    </span>
  ));
}

function LibraryRow({ model: m, busy, onOpen }: { model: LibraryModel; busy: boolean; onOpen: (path: string) => void }) {
  const facts = [m.architecture, m.quantization, m.parameterCount ? `${formatParams(m.parameterCount)} params` : null, formatBytes(m.fileBytes), m.trainedContext ? `${formatTokens(m.trainedContext)} ctx` : null];
  const mem = m.memory;
  return (
    <li className={`library-row${m.problem ? ' library-row-problem' : ''}`} data-source={m.source}>
      <span className="library-name" title={m.path}>
        {breakable(m.name)}
      </span>
      <div className="library-facts">
        <span className={`badge library-source source-${m.source}`}>{SOURCE_LABEL[m.source]}</span> {facts.filter(Boolean).join(' · ')}
      </div>
      {m.source === 'builtin' && <div className="library-note">{BUILTIN_NOTE}</div>}
      {mem && (
        <div className={`library-fit ${mem.fits ? 'fits' : 'no-fit'}`}>
          {mem.fits ? 'Fits' : 'Does not fit'}: needs {formatBytes(mem.totalBytes)} (KV cache {formatBytes(mem.kvCacheBytes)} at {formatTokens(mem.maxContext)} tokens) of{' '}
          {formatBytes(mem.availableBytes)} free
        </div>
      )}
      {m.problem && <div className="library-problem">{m.problem}</div>}
      <button type="button" className="btn btn-secondary btn-sm library-open" aria-label={`Open ${m.name}`} onClick={() => onOpen(m.path)} disabled={busy || m.problem !== null}>
        Open
      </button>
    </li>
  );
}
