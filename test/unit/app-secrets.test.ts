/**
 * A remote engine's API key at rest (app/secrets.ts over main/services/secrets.ts, real SQLite):
 * encrypted where safeStorage really encrypts, never where it would only obscure (Linux
 * 'basic_text') or cannot; kept for its base URL only; in memory only without a cipher.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { safeStorageCipher, type SafeStorageLike } from '../../app/secrets.ts';
import { RemoteKeyStore } from '../../main/services/secrets.ts';
import { ConversationStore } from '../../main/services/store.ts';

/** A keychain stand-in (XOR with a byte): reversible, and not the plain text. */
const keychain = (backend: string, available = true): SafeStorageLike => ({
  isEncryptionAvailable: () => available,
  getSelectedStorageBackend: () => backend,
  encryptString: (s) => Buffer.from([...Buffer.from(s)].map((b) => b ^ 0x5a)),
  decryptString: (b) => Buffer.from([...b].map((x) => x ^ 0x5a)).toString(),
});

test('safeStorage is used only where it really encrypts', () => {
  assert.equal(safeStorageCipher(undefined), null);
  assert.equal(safeStorageCipher(keychain('gnome_libsecret', false)), null);
  if (process.platform === 'linux') assert.equal(safeStorageCipher(keychain('basic_text')), null, "Linux's fixed-password backend is not encryption");
  const cipher = safeStorageCipher(keychain('gnome_libsecret'))!;
  assert.notEqual(cipher.encrypt('sk-abc'), 'sk-abc');
  assert.equal(cipher.decrypt(cipher.encrypt('sk-abc')), 'sk-abc');
});

test('the key is stored encrypted for its base URL, survives a restart, and is never given to another URL', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-secrets-'));
  try {
    const cipher = safeStorageCipher(keychain('gnome_libsecret'));
    let store = new ConversationStore(dir);
    new RemoteKeyStore(store, cipher).save('http://a.test/v1', 'sk-abc');
    assert.ok(!JSON.stringify(store.getSettings()).includes('sk-abc'), 'not in the database as text');
    store.close();
    store = new ConversationStore(dir);
    const keys = new RemoteKeyStore(store, cipher);
    assert.equal(keys.storage, 'encrypted');
    assert.equal(keys.load('http://a.test/v1'), 'sk-abc', 'after a restart');
    assert.equal(keys.load('http://b.test/v1'), null, 'another server gets nothing');
    keys.save('http://a.test/v1', null);
    assert.equal(keys.load('http://a.test/v1'), null, 'forgotten');

    const memory = new RemoteKeyStore(store, null);
    memory.save('http://a.test/v1', 'sk-mem');
    assert.equal(memory.storage, 'memory');
    assert.equal(memory.load('http://a.test/v1'), 'sk-mem');
    assert.ok(!JSON.stringify(store.getSettings()).includes('sk-mem'), 'never written without a cipher');
    assert.equal(new RemoteKeyStore(store, null).load('http://a.test/v1'), null, 'gone with the process');
    store.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
