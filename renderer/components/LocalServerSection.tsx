/**
 * Settings → Local server (desktop app): serve the loaded model's OpenAI-compatible API on
 * 127.0.0.1 for other tools. Off by default; a port; the one browser origin allowed to call it
 * (CORS; empty = none), checked at the field by the contract's origin rule and saved normalized;
 * the base URL with a copy button while it runs, or why it does not (port in use). Hidden where
 * the transport has no separate server: in `serve` mode (the WebSocket transport), which answers
 * /v1 at its own address, it says that the API is live and at what URL instead.
 */
import { useEffect, useState } from 'react';
import { parseOrigin } from '../../main/contract/origin.ts';
import { corsFieldError } from '../lib/cors-field.ts';
import type { SettingsPatch } from '../stores/settings.ts';
import { useSettings } from '../hooks.ts';
import { CopyButton } from './CopyButton.tsx';
import { getConnection } from '../api.ts';

export function LocalServerSection({ onSave }: { onSave: (patch: SettingsPatch) => Promise<boolean> }) {
  const settings = useSettings((s) => s.settings);
  const server = useSettings((s) => s.localServer);
  const [port, setPort] = useState('');
  const [cors, setCors] = useState('');
  useEffect(() => setPort(settings ? String(settings.localServerPort) : ''), [settings?.localServerPort]);
  useEffect(() => setCors(settings?.localServerCors ?? ''), [settings?.localServerCors]);
  if (server?.status === 'unavailable' && getConnection() !== null) return <ServeApiNote />;
  if (!settings || !server || server.status === 'unavailable') return null;
  const corsError = corsFieldError(cors);
  const saveCors = () => {
    if (corsError) return;
    const origin = cors.trim() === '' ? '' : (parseOrigin(cors) ?? '');
    if (origin !== settings.localServerCors) void onSave({ localServerCors: origin });
    else setCors(origin); // show it as stored ('HTTP://X/' → 'http://x')
  };
  const portOk = /^\d{1,5}$/.test(port) && Number(port) <= 65535;
  const savePort = () => {
    if (portOk && Number(port) !== settings.localServerPort) void onSave({ localServerPort: Number(port) });
    else if (!portOk) setPort(String(settings.localServerPort));
  };
  return (
    <section className="panel-section" aria-labelledby="local-server-heading">
      <h2 id="local-server-heading">Local server</h2>
      <label className="field checkbox">
        <input type="checkbox" checked={settings.localServer} onChange={(e) => void onSave({ localServer: e.target.checked })} />
        <span>Serve the model to other tools (OpenAI-compatible API on this computer only)</span>
      </label>
      <div className="field">
        <label htmlFor="setting-local-server-port">Port</label>
        <input
          id="setting-local-server-port"
          type="text"
          inputMode="numeric"
          value={port}
          aria-invalid={portOk ? undefined : true}
          onChange={(e) => setPort(e.target.value)}
          onBlur={savePort}
          onKeyDown={(e) => e.key === 'Enter' && savePort()}
        />
      </div>
      <div className={`field${corsError ? ' invalid' : ''}`}>
        <label htmlFor="setting-local-server-cors">Allowed browser origin (CORS)</label>
        <input
          id="setting-local-server-cors"
          type="text"
          inputMode="url"
          spellCheck={false}
          placeholder="None"
          value={cors}
          aria-invalid={corsError ? true : undefined}
          aria-describedby={corsError ? 'setting-local-server-cors-error' : undefined}
          onChange={(e) => setCors(e.target.value)}
          onBlur={saveCors}
          onKeyDown={(e) => e.key === 'Enter' && saveCors()}
        />
        {corsError ? (
          <span className="field-error" id="setting-local-server-cors-error" role="alert">
            {corsError}
          </span>
        ) : (
          <span className="field-hint">A web page at this origin may call the API; empty: none.</span>
        )}
      </div>
      {server.status === 'running' && server.baseUrl && (
        <p className="local-server-url" role="status">
          <span>Base URL</span> <code>{server.baseUrl}</code> <CopyButton label="Copy base URL" text={() => server.baseUrl ?? ''} className="btn btn-ghost btn-xs" />
        </p>
      )}
      {server.status === 'error' && (
        <p className="field-error" role="alert">
          {server.error}
        </p>
      )}
    </section>
  );
}

/** `serve` mode: this page's own server answers the OpenAI-compatible API under /v1. */
function ServeApiNote() {
  const baseUrl = `${location.origin}/v1`;
  return (
    <section className="panel-section" aria-labelledby="local-server-heading">
      <h2 id="local-server-heading">API</h2>
      <p className="local-server-url" role="status">
        <span>The OpenAI-compatible API of the loaded model is live at</span> <code>{baseUrl}</code>{' '}
        <CopyButton label="Copy base URL" text={() => baseUrl} className="btn btn-ghost btn-xs" />
      </p>
      <p className="field-hint">On this computer only (127.0.0.1); other tools use it as an OpenAI base URL.</p>
    </section>
  );
}

