/**
 * A damaged conversations database is moved aside and a fresh one started, on real SQLite
 * files: random bytes (the "file is not a database", which stopped serve with exit 1),
 * a database whose header is fine but whose pages are overwritten (found by PRAGMA
 * integrity_check); a sound database is kept as it is, and a
 * database from a newer version is refused without being moved.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync, writeSync, closeSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { ServiceError } from '../../main/services/errors.ts';
import { corruptName, databaseDamage, openConversationStore } from '../../main/services/store-recovery.ts';
import { ConversationStore, DB_FILE } from '../../main/services/store.ts';

const root = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-store-recovery-'));
after(() => rmSync(root, { recursive: true, force: true }));
const NOW = new Date('2026-12-01T23:05:09.123Z');

let n = 0;
function dataDir(): string {
  return path.join(root, `data-${n++}`);
}

/** A store with `count` conversations of one long message each, closed. */
function filledStore(dir: string, count: number): string {
  const store = new ConversationStore(dir);
  for (let i = 0; i < count; i++) {
    const c = store.createConversation();
    store.appendMessage(c.id, { role: 'user', content: `message ${i} `.repeat(200), status: 'complete' });
  }
  store.close();
  return path.join(dir, DB_FILE);
}

describe('openConversationStore', () => {
  it('moves a file of random bytes aside and starts a fresh, working database', () => {
    const dir = dataDir();
    const { store: first } = openConversationStore(dir);
    first.close();
    const file = path.join(dir, DB_FILE);
    const junk = randomBytes(64 * 1024);
    writeFileSync(file, junk);
    const { store, recovery } = openConversationStore(dir, NOW);
    try {
      assert.ok(recovery);
      assert.equal(recovery.movedTo, `${file}.corrupt-2026-12-01T23-05-09Z`);
      assert.match(recovery.reason, /file is not a database/);
      assert.equal(recovery.message, `the conversations database ${file} could not be opened (file is not a database); it was moved to ${recovery.movedTo} and a new, empty one was started`);
      assert.deepEqual(readFileSync(recovery.movedTo), junk);
      assert.equal(store.listConversations().length, 0);
      const c = store.createConversation();
      assert.equal(store.listConversations()[0].id, c.id);
    } finally {
      store.close();
    }
  });

  it('finds overwritten pages behind a sound header with integrity_check', () => {
    const dir = dataDir();
    const file = filledStore(dir, 60);
    const pageSize = (new Database(file, { readonly: true }).pragma('page_size', { simple: true })) as number;
    const pages = statSync(file).size / pageSize;
    assert.ok(pages > 20, `only ${pages} pages`);
    // Overwrite the middle pages (not page 1: the header stays readable) with junk.
    const fd = openSync(file, 'r+');
    writeSync(fd, randomBytes(pageSize * 4), 0, pageSize * 4, pageSize * Math.floor(pages / 2));
    closeSync(fd);
    assert.notEqual(databaseDamage(file), null);
    const { store, recovery } = openConversationStore(dir, NOW);
    try {
      assert.ok(recovery);
      assert.match(recovery.reason, /integrity check: |malformed/);
      assert.ok(existsSync(recovery.movedTo));
      assert.equal(store.listConversations().length, 0);
    } finally {
      store.close();
    }
  });

  it('keeps a sound database as it is', () => {
    const dir = dataDir();
    filledStore(dir, 3);
    const { store, recovery } = openConversationStore(dir, NOW);
    try {
      assert.equal(recovery, null);
      assert.equal(store.listConversations().length, 3);
    } finally {
      store.close();
    }
  });

  it('refuses a database from a newer version without moving it', () => {
    const dir = dataDir();
    const file = filledStore(dir, 1);
    const db = new Database(file);
    db.pragma('user_version = 999');
    db.close();
    assert.throws(() => openConversationStore(dir, NOW), (e: unknown) => e instanceof ServiceError && e.code === 'SCHEMA_TOO_NEW');
    assert.ok(existsSync(file));
    assert.ok(!existsSync(corruptName(file, NOW)));
  });
});
