/**
 * The remote engine's API key at rest in the desktop app: encrypted with Electron's `safeStorage`
 * (the OS keychain: Keychain on macOS, DPAPI on Windows, libsecret or kwallet on Linux). Where
 * safeStorage cannot encrypt, or would only obscure the key with a fixed password (Linux's
 * 'basic_text' backend, when no keyring runs), there is no cipher and the services keep the key
 * in memory only (the model panel says so). Pure: the caller passes Electron's safeStorage in.
 */
import type { SecretCipher } from '../main/services/secrets.ts';

/** The part of Electron's `safeStorage` used here. */
export interface SafeStorageLike {
  isEncryptionAvailable(): boolean;
  encryptString(plain: string): Buffer;
  decryptString(encrypted: Buffer): string;
  /** Linux only. */
  getSelectedStorageBackend?(): string;
}

/** A cipher over safeStorage, or null where it does not really encrypt. */
export function safeStorageCipher(safeStorage: SafeStorageLike | undefined): SecretCipher | null {
  if (!safeStorage?.isEncryptionAvailable()) return null;
  if (process.platform === 'linux' && safeStorage.getSelectedStorageBackend?.() === 'basic_text') return null;
  return {
    encrypt: (plain) => safeStorage.encryptString(plain).toString('base64'),
    decrypt: (stored) => safeStorage.decryptString(Buffer.from(stored, 'base64')),
  };
}
