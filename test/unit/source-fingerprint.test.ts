/**
 * The racy-file rule of the source fingerprint (main/engine/model/source-fingerprint.ts, git's
 * "racy git" idea): a file written within RACY_WINDOW_MS of now is not settled, so its
 * fingerprint is not recorded; the injected clock decides "now".
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fingerprintFiles, RACY_WINDOW_MS } from '../../main/engine/model/source-fingerprint.ts';

test('a file just written is racy; the same file seen from past the window is settled, same key', async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'ropewalk-racy-'));
  try {
    const f = path.join(dir, 'config.json');
    await writeFile(f, '{}');
    const now = await fingerprintFiles([f], 'salt');
    const later = await fingerprintFiles([f], 'salt', () => Date.now() + RACY_WINDOW_MS + 100);
    assert.equal(now.settled, false);
    assert.equal(later.settled, true);
    assert.equal(later.key, now.key, 'the clock changes only whether it is settled');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
