/**
 * A stand-in $HOME laid out as LM Studio, Ollama (manifest + blob), Jan and the Hugging Face hub
 * cache lay out their model folders, holding real small GGUF files copied at test time from
 * `../shared/models` (never committed), plus a Hugging Face safetensors folder and things that are
 * not models. For the model library's tests (point `ROPEWALK_LIBRARY_HOME` at `home`).
 */
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { GGUF_DIR, STORIES_GGUF } from './paths.ts';
import { writeSyntheticCheckpoint } from './synthetic-hf.ts';

export interface LibraryFixture {
  home: string;
  /** Ropewalk's models folder (`~/.ropewalk/models`, the default). */
  modelsFolder: string;
  /** The name each model should be listed under → its path. */
  expected: Record<string, string>;
  remove(): void;
}

/** The Ollama blob digest of a file: its sha256, as Ollama names blobs. */
function sha256(file: string): string {
  return createHash('sha256').update(readFileSync(file)).digest('hex');
}

function put(file: string, from: string): string {
  mkdirSync(path.dirname(file), { recursive: true });
  copyFileSync(from, file);
  return file;
}

/** Builds the fixture home under the OS temp folder. */
export async function makeLibraryFixture(): Promise<LibraryFixture> {
  const home = mkdtempSync(path.join(os.tmpdir(), 'ropewalk-library-'));
  const modelsFolder = path.join(home, '.ropewalk', 'models');
  const expected: Record<string, string> = {};

  // LM Studio: models/<publisher>/<repo>/<file>.gguf, and a vision projector that is not a model.
  const lms = path.join(home, '.lmstudio', 'models', 'lmstudio-community', 'stories260K-GGUF');
  expected['lmstudio-community/stories260K-GGUF/stories260K-Q8_0'] = put(path.join(lms, 'stories260K-Q8_0.gguf'), path.join(GGUF_DIR, 'stories260K-q8_0.gguf'));
  put(path.join(lms, 'mmproj-stories-f16.gguf'), path.join(GGUF_DIR, 'stories260K-q8_0.gguf'));

  // Ollama: manifests/registry.ollama.ai/library/stories/q4 names blobs/sha256-<digest>.
  const ollama = path.join(home, '.ollama', 'models');
  const q4 = path.join(GGUF_DIR, 'stories260K-q4_0.gguf');
  const digest = sha256(q4);
  const blob = put(path.join(ollama, 'blobs', `sha256-${digest}`), q4);
  const manifest = (d: string) =>
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
      config: { mediaType: 'application/vnd.docker.container.image.v1+json', digest: `sha256:${'0'.repeat(64)}`, size: 2 },
      layers: [
        { mediaType: 'application/vnd.ollama.image.model', digest: `sha256:${d}`, size: 370752 },
        { mediaType: 'application/vnd.ollama.image.template', digest: `sha256:${'1'.repeat(64)}`, size: 10 },
      ],
    });
  const manifests = path.join(ollama, 'manifests', 'registry.ollama.ai');
  mkdirSync(path.join(manifests, 'library', 'stories'), { recursive: true });
  writeFileSync(path.join(manifests, 'library', 'stories', 'q4'), manifest(digest));
  expected['stories:q4'] = blob;
  mkdirSync(path.join(manifests, 'someone', 'tales'), { recursive: true });
  writeFileSync(path.join(manifests, 'someone', 'tales', 'latest'), manifest(digest));
  expected['someone/tales:latest'] = blob;
  // A manifest whose blob was deleted, and one that is not JSON: neither is listed.
  mkdirSync(path.join(manifests, 'library', 'gone'), { recursive: true });
  writeFileSync(path.join(manifests, 'library', 'gone', 'latest'), manifest('f'.repeat(64)));
  writeFileSync(path.join(manifests, 'library', 'stories', 'broken'), 'not json');

  // Jan (0.6+): ~/.local/share/Jan/data/llamacpp/models/<id>/model.gguf.
  expected['stories-q5'] = put(path.join(home, '.local', 'share', 'Jan', 'data', 'llamacpp', 'models', 'stories-q5', 'model.gguf'), path.join(GGUF_DIR, 'stories260K-q5_1.gguf'));

  // Hugging Face hub cache: a GGUF repository and a safetensors one, refs/main naming the snapshot.
  const hub = path.join(home, '.cache', 'huggingface', 'hub');
  const rev = 'a'.repeat(40);
  const ggufRepo = path.join(hub, 'models--karpathy--tinyllamas');
  expected['karpathy/tinyllamas/stories260K'] = put(path.join(ggufRepo, 'snapshots', rev, 'stories260K.gguf'), STORIES_GGUF);
  mkdirSync(path.join(ggufRepo, 'refs'), { recursive: true });
  writeFileSync(path.join(ggufRepo, 'refs', 'main'), rev);
  const hfSnapshot = path.join(hub, 'models--tiny-org--tiny-qwen3', 'snapshots', 'b'.repeat(40));
  mkdirSync(hfSnapshot, { recursive: true });
  await writeSyntheticCheckpoint(hfSnapshot, { family: 'qwen3', dtype: 'BF16', maxPositionEmbeddings: 2048 });
  expected['tiny-org/tiny-qwen3'] = hfSnapshot;

  // Ropewalk's own folder: a GGUF, and a text file that is not a model (not listed: no model extension).
  expected['stories260K-q8'] = put(path.join(modelsFolder, 'stories260K-q8.gguf'), path.join(GGUF_DIR, 'stories260K-q8_0.gguf'));
  mkdirSync(modelsFolder, { recursive: true });
  writeFileSync(path.join(modelsFolder, 'notes.txt'), 'not a model');

  return { home, modelsFolder, expected, remove: () => rmSync(home, { recursive: true, force: true }) };
}
