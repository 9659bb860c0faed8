/**
 * Settings → Local server (desktop app): serve the loaded model's OpenAI-compatible API on
 * 127.0.0.1 for other tools. Off by default; a port; the base URL with a copy button while it
 * runs, or why it does not (port in use). Hidden where the transport has no separate server
 * (`serve` mode answers /v1 at its own address).
 */
import { useEffect, useState } from 'react';
import type { SettingsPatch } from '../stores/settings.ts';
import { useSettings } from '../hooks.ts';
import { CopyButton } from './CopyButton.tsx';

export function LocalServerSection({ onSave }: { onSave: (patch: SettingsPatch) => Promise<boolean> }) {
  const settings = useSettings((s) => s.settings);
  const server = useSettings((s) => s.localServer);
  const [port, setPort] = useState('');
  useEffect(() => setPort(settings ? String(settings.localServerPort) : ''), [settings?.localServerPort]);
  if (!settings || !server || server.status === 'unavailable') return null;
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
