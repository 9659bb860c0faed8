/**
 * The remote engine's API key, kept for its base URL only (a key is never sent to another
 * server). With a `SecretCipher` (the desktop app: Electron's `safeStorage`, the OS keychain) it
 * is stored encrypted in the settings table and survives a restart; without one (`serve` mode,
 * where safeStorage does not exist) it stays in this process's memory only and is gone at the
 * next start, which the model state says. The key is never logged, never put in an error, and
 * never sent to the window: the window learns only whether there is one and how it is kept.
 */
import type { ConversationStore } from './store.ts';

/** Encrypts text at rest (Electron's safeStorage in the app). Both may throw (keychain locked). */
export interface SecretCipher {
  /** The ciphertext, base64. */
  encrypt(plain: string): string;
  decrypt(stored: string): string;
}

/** How the key is kept: 'encrypted' on disk, 'memory' until the process ends. */
export type KeyStorage = 'encrypted' | 'memory';

const KEY = 'remote.apiKey';

export class RemoteKeyStore {
  private inMemory: { baseUrl: string; key: string } | null = null;

  constructor(
    private readonly store: ConversationStore,
    private readonly cipher: SecretCipher | null,
  ) {}

  get storage(): KeyStorage {
    return this.cipher ? 'encrypted' : 'memory';
  }

  /** The key saved for `baseUrl`, or null (none, another server's, or one that cannot be decrypted). */
  load(baseUrl: string): string | null {
    if (!this.cipher) return this.inMemory?.baseUrl === baseUrl ? this.inMemory.key : null;
    const saved = this.store.getSettings()[KEY] as { baseUrl?: unknown; data?: unknown } | undefined;
    if (!saved || saved.baseUrl !== baseUrl || typeof saved.data !== 'string') return null;
    try {
      return this.cipher.decrypt(saved.data);
    } catch {
      return null; // another user's or machine's keychain: the user enters it again
    }
  }

  /** Keeps `key` for `baseUrl` (null forgets it). */
  save(baseUrl: string, key: string | null): void {
    if (!this.cipher) {
      this.inMemory = key ? { baseUrl, key } : null;
      return;
    }
    this.store.setSettings({ [KEY]: key ? { baseUrl, data: this.cipher.encrypt(key) } : undefined });
  }
}
