/**
 * The model panel's "Remote engine" source: an OpenAI-compatible server (vLLM, llama.cpp's
 * server, Ollama, TGI, another Ropewalk) as the engine. Base URL, an optional API key (sent once
 * to the services, which keep it encrypted in the desktop app or in memory in serve mode; the
 * field is emptied and never filled back), "List models" (the server's /v1/models) to pick the
 * model id, and an optional tokenizer.json for exact counts when the server has no /tokenize.
 * Failures are said once, in this form.
 */
import { useState, type FormEvent } from 'react';
import { useShallow } from 'zustand/react/shallow';
import { useModel, useStores } from '../hooks.ts';
import { FormStatus } from './FormStatus.tsx';

export function RemoteEngineForm() {
  const stores = useStores();
  const { models, busy, error, current } = useModel(
    useShallow((s) => ({ models: s.remoteModels, busy: s.remoteBusy, error: s.remoteError, current: s.model?.info?.remote ?? null })),
  );
  const [baseUrl, setBaseUrl] = useState(current?.baseUrl ?? '');
  const [apiKey, setApiKey] = useState('');
  const [model, setModel] = useState(current?.model ?? '');
  const [tokenizerPath, setTokenizerPath] = useState('');
  const keySaved = current !== null && current.baseUrl === baseUrl.trim() && current.apiKey !== 'none';

  const list = () => void stores.model.getState().listRemote(baseUrl.trim(), apiKey || undefined);
  const connect = async (e: FormEvent) => {
    e.preventDefault();
    const chosen = model || models?.[0]?.id || '';
    const ok = await stores.model.getState().connectRemote({
      baseUrl: baseUrl.trim(),
      model: chosen,
      ...(apiKey ? { apiKey } : {}),
      ...(tokenizerPath.trim() ? { tokenizerPath: tokenizerPath.trim() } : {}),
    });
    if (ok) setApiKey(''); // kept by the services; never shown again
  };
  const options = models ?? (current ? [{ id: current.model, maxContext: null }] : []);

  return (
    <form className="remote-engine" onSubmit={connect} aria-labelledby="remote-engine-heading">
      <h3 id="remote-engine-heading">Remote engine</h3>
      <p className="field-hint">A server that speaks the OpenAI API (vLLM, llama.cpp, Ollama, TGI, another Ropewalk) answers instead of this computer.</p>
      <div className="field">
        <label htmlFor="remote-url">Base URL</label>
        <input id="remote-url" placeholder="http://127.0.0.1:8000/v1" value={baseUrl} onChange={(e) => setBaseUrl(e.target.value)} spellCheck={false} inputMode="url" />
      </div>
      <div className="field">
        <label htmlFor="remote-key">API key</label>
        <input
          id="remote-key"
          type="password"
          autoComplete="off"
          placeholder={keySaved ? 'Saved (type to replace)' : 'None'}
          value={apiKey}
          onChange={(e) => setApiKey(e.target.value)}
        />
      </div>
      <div className="field">
        <label htmlFor="remote-model">Model</label>
        <div className="open-model-row">
          <select id="remote-model" value={model || options[0]?.id || ''} onChange={(e) => setModel(e.target.value)} disabled={options.length === 0}>
            {options.length === 0 && <option value="">List the server's models first</option>}
            {options.map((m) => (
              <option key={m.id} value={m.id}>
                {m.id}
                {m.maxContext ? ` (${m.maxContext.toLocaleString('en-US')} tokens)` : ''}
              </option>
            ))}
          </select>
          <button type="button" className="btn btn-secondary btn-sm" onClick={list} disabled={busy !== null || !baseUrl.trim()}>
            List models
          </button>
        </div>
      </div>
      <div className="field">
        <label htmlFor="remote-tokenizer">tokenizer.json (optional)</label>
        <input id="remote-tokenizer" placeholder="For exact counts when the server cannot count" value={tokenizerPath} onChange={(e) => setTokenizerPath(e.target.value)} spellCheck={false} />
      </div>
      <button type="submit" className="btn btn-primary btn-sm" disabled={busy !== null || !baseUrl.trim() || options.length === 0}>
        Use remote engine
      </button>
      <FormStatus busy={busy === null ? null : busy === 'list' ? 'Asking the server for its models…' : 'Connecting…'} error={error} />
    </form>
  );
}
