/**
 * The error banner: one dismissible line per failed call (its readable sentence, with the code in
 * a tooltip), and a slim bar while the serve-mode connection is being re-established.
 */
import { useSyncExternalStore } from 'react';
import type { WsApi } from '../lib/ws-client.ts';
import { useNotices, useStores } from '../hooks.ts';
import { XIcon } from './icons.tsx';

export function Notices() {
  const stores = useStores();
  const notices = useNotices((s) => s.notices);
  if (notices.length === 0) return null;
  return (
    <div className="notices">
      {notices.map((n) => (
        <div key={n.id} className="notice" role="alert" title={n.code}>
          <span className="notice-text">{n.message}</span>
          <button type="button" className="icon-btn" aria-label="Dismiss" title="Dismiss" onClick={() => stores.notices.getState().dismiss(n.id)}>
            <XIcon size={14} />
          </button>
        </div>
      ))}
    </div>
  );
}

const noop = () => () => {};

export function ConnectionBar({ connection }: { connection: WsApi | null }) {
  const status = useSyncExternalStore(connection ? (cb) => connection.onStatus(cb) : noop, () => connection?.status ?? 'open');
  if (status === 'open' || status === 'connecting') return null;
  return (
    <div className="connection-bar" role="status">
      {status === 'reconnecting' ? 'Connection to Ropewalk lost — reconnecting…' : 'Disconnected from Ropewalk.'}
    </div>
  );
}
