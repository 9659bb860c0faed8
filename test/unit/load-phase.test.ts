/**
 * The one wording of load phases (main/contract/load-phase.ts), shared by the CLI's progress line
 * and the window's model panel: every phase the bundle import and the services report has words
 * (never the bare key), and a phase the table does not know is shown as it is.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadPhaseWords } from '../../main/contract/load-phase.ts';
import { formatLoadProgress } from '../../main/cli/progress.ts';

test('each reported phase in words', () => {
  assert.deepEqual(
    ['start', 'restart', 'connect', 'hash', 'import', 'build', 'write', 'cached'].map(loadPhaseWords),
    ['starting the engine', 'restarting the engine', 'connecting to the remote engine', 'hashing the model files', 'reading the model', 'building the graph', 'writing weights', 'found in the model cache'],
  );
});

test('an unknown phase as it is, even one named like an Object property', () => {
  assert.equal(loadPhaseWords('unpack'), 'unpack');
  assert.equal(loadPhaseWords('toString'), 'toString');
  assert.equal(loadPhaseWords('constructor'), 'constructor');
});

test('the CLI line uses the same words as the window', () => {
  for (const phase of ['hash', 'import', 'build', 'write', 'cached']) assert.equal(formatLoadProgress(phase, 0), `importing the model: ${loadPhaseWords(phase)}`);
});
