/**
 * The one wording of a model load's phase, shared by the CLI's progress line (main/cli/progress.ts)
 * and the window's model panel (renderer/components/ModelPanel.tsx). The phases are the bundle
 * import's (`hash`, `import`, `build`, `write`, `cached`: main/engine/model/bundle.ts) and the
 * services' own (`start`, `restart`, `connect`: main/services/model-service.ts), carried as
 * `ModelState.progress.phase`. Dependency-free, so the renderer imports it as is.
 */

const PHASES: Record<string, string> = {
  start: 'starting the engine',
  restart: 'restarting the engine',
  connect: 'connecting to the remote engine',
  hash: 'hashing the model files',
  import: 'reading the model',
  build: 'building the graph',
  write: 'writing weights',
  cached: 'found in the model cache',
};

/**
 * `phase` in words, lowercase, no trailing period: 'write' → 'writing weights'. A phase this
 * table does not know is returned as it is (a newer engine may add one).
 */
export function loadPhaseWords(phase: string): string {
  return Object.hasOwn(PHASES, phase) ? PHASES[phase] : phase;
}
