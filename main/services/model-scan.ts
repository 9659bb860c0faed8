/**
 * Finds model files and folders in the places people keep them, without reading any model data:
 * Ropewalk's own models folder, and (read-only: nothing here writes, copies or moves) the folders
 * of LM Studio, Ollama, Jan and the Hugging Face hub cache. It yields candidates (path, name as
 * that app names it, format); `model-facts.ts` then reads their headers.
 *
 * Layouts (as each app writes them):
 * - LM Studio: `~/.lmstudio/models/<publisher>/<repo>/<file>.gguf` (older: `~/.cache/lm-studio/models`).
 * - Ollama: `~/.ollama/models/manifests/<registry>/<namespace>/<name>/<tag>` is JSON whose layer of
 *   media type `application/vnd.ollama.image.model` names the GGUF blob by digest, stored as
 *   `blobs/sha256-<hex>`; shown `name:tag` (`namespace/name:tag` outside `library`). `OLLAMA_MODELS`
 *   moves the folder, as in Ollama.
 * - Jan: its data folder (`~/jan` up to 0.5, `~/.local/share/Jan/data` since; the one configured in
 *   `~/.config/Jan/settings.json`'s `data_folder` first), GGUF files under `models/` and `llamacpp/models/`.
 * - Hugging Face: `~/.cache/huggingface/hub/models--<org>--<name>/snapshots/<rev>/` (the revision
 *   `refs/main` names, else the newest), its GGUF files and, with `config.json` and safetensors,
 *   the folder itself. `HF_HUB_CACHE` / `HF_HOME` move it, as in huggingface_hub.
 * - Ropewalk's folder: GGUF files, llama2.c `.bin` files, Hugging Face folders and bundles.
 *
 * Walks are bounded in depth, skip what cannot be read, and never follow a link to a folder
 * (a link to a file, as the HF cache's snapshots hold, is followed).
 */
import type { Dirent } from 'node:fs';
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import type { LibraryFormat, LibraryRoot, LibrarySource } from '../contract/library.ts';

/** A model found on disk, before its header is read. */
export interface ModelCandidate {
  path: string;
  name: string;
  source: Exclude<LibrarySource, 'builtin'>;
  format: LibraryFormat;
}

/** Where to look. `home` stands for $HOME (tests point it at fixture folders). */
export interface ScanRoots {
  home: string;
  /** Ropewalk's own models folder. */
  modelsFolder: string;
  /** Environment the other apps' own overrides come from (`OLLAMA_MODELS`, `HF_HUB_CACHE`, `HF_HOME`); none: only `home`. */
  env?: Record<string, string | undefined>;
}

/** Deepest folder level a walk descends to below its root. */
const MAX_DEPTH = 5;
/** Most entries one walk looks at (a models folder with a million files stops there). */
const MAX_ENTRIES = 20_000;

const OLLAMA_MODEL_LAYER = 'application/vnd.ollama.image.model';
const OLLAMA_DEFAULT_REGISTRY = 'registry.ollama.ai';

/** Every root the library looks in, with whether it exists. */
export async function libraryRoots(r: ScanRoots): Promise<LibraryRoot[]> {
  const env = r.env ?? {};
  const hfHub = env.HF_HUB_CACHE || (env.HF_HOME ? path.join(env.HF_HOME, 'hub') : path.join(r.home, '.cache', 'huggingface', 'hub'));
  const listed: Array<[LibraryRoot['source'], string]> = [
    ['ropewalk', r.modelsFolder],
    ['lmstudio', path.join(r.home, '.lmstudio', 'models')],
    ['lmstudio', path.join(r.home, '.cache', 'lm-studio', 'models')],
    ['ollama', env.OLLAMA_MODELS || path.join(r.home, '.ollama', 'models')],
    ...(await janDataFolders(r.home)).map((p): [LibraryRoot['source'], string] => ['jan', p]),
    ['huggingface', hfHub],
  ];
  const seen = new Set<string>();
  const roots: LibraryRoot[] = [];
  for (const [source, p] of listed) {
    const resolved = path.resolve(p);
    if (seen.has(resolved)) continue;
    seen.add(resolved);
    roots.push({ source, path: resolved, found: await isDir(resolved) });
  }
  return roots;
}

/** The candidates under every found root, in root order, then path order. */
export async function scanModels(roots: LibraryRoot[]): Promise<ModelCandidate[]> {
  const out: ModelCandidate[] = [];
  for (const root of roots) {
    if (!root.found) continue;
    const found = await SCANNERS[root.source](root.path);
    out.push(...found.sort((a, b) => a.path.localeCompare(b.path)));
  }
  return out;
}

const SCANNERS: Record<LibraryRoot['source'], (root: string) => Promise<ModelCandidate[]>> = {
  ropewalk: scanRopewalk,
  lmstudio: (root) => ggufFiles(root, 'lmstudio', (rel) => rel.replace(/\.gguf$/i, '')),
  ollama: scanOllama,
  jan: scanJan,
  huggingface: scanHuggingFace,
};

/** Ropewalk's folder: GGUF and llama2.c files, HF folders and bundles (their own names: the relative path). */
async function scanRopewalk(root: string): Promise<ModelCandidate[]> {
  const out: ModelCandidate[] = [];
  await walk(root, async (full, entry, names) => {
    const rel = path.relative(root, full) || path.basename(full);
    if (entry === 'dir') {
      const format = folderFormat(names ?? []);
      if (format) out.push({ path: full, name: rel, source: 'ropewalk', format });
      return format === null; // a model folder's files are its own, not more models
    }
    if (isGguf(full)) out.push({ path: full, name: rel.replace(/\.gguf$/i, ''), source: 'ropewalk', format: 'gguf' });
    else if (/\.bin$/i.test(full) && !/^tok(enizer|\d+)\.bin$/i.test(path.basename(full)) && !(names ?? []).includes('config.json')) {
      out.push({ path: full, name: rel.replace(/\.bin$/i, ''), source: 'ropewalk', format: 'llama2c' });
    }
    return true;
  });
  return out;
}

/** Ollama: one candidate per manifest whose model layer's blob exists. */
async function scanOllama(root: string): Promise<ModelCandidate[]> {
  const manifests = path.join(root, 'manifests');
  const out: ModelCandidate[] = [];
  await walk(manifests, async (full, entry) => {
    if (entry === 'dir') return true;
    const parts = path.relative(manifests, full).split(path.sep);
    if (parts.length !== 4) return true; // <registry>/<namespace>/<name>/<tag>
    const blob = await ollamaBlob(root, full);
    if (!blob) return true;
    const [registry, namespace, name, tag] = parts;
    const shown = registry !== OLLAMA_DEFAULT_REGISTRY ? `${registry}/${namespace}/${name}` : namespace === 'library' ? name : `${namespace}/${name}`;
    out.push({ path: blob, name: `${shown}:${tag}`, source: 'ollama', format: 'gguf' });
    return true;
  });
  return out;
}

/** The blob path an Ollama manifest names for its model layer, or null (not a manifest, no such blob). */
async function ollamaBlob(root: string, manifest: string): Promise<string | null> {
  const text = await readFile(manifest, 'utf8').catch(() => null);
  if (text === null || text.length > 1_000_000) return null;
  let layers: unknown;
  try {
    layers = (JSON.parse(text) as { layers?: unknown }).layers;
  } catch {
    return null;
  }
  if (!Array.isArray(layers)) return null;
  const layer = layers.find((l) => (l as { mediaType?: unknown })?.mediaType === OLLAMA_MODEL_LAYER) as { digest?: unknown } | undefined;
  const digest = typeof layer?.digest === 'string' ? /^sha256[:-]([0-9a-f]{64})$/.exec(layer.digest) : null;
  if (!digest) return null;
  const blob = path.join(root, 'blobs', `sha256-${digest[1]}`);
  return (await stat(blob).catch(() => null))?.isFile() ? blob : null;
}

/** Jan's data folders: the configured one, then the defaults of old and new versions. */
async function janDataFolders(home: string): Promise<string[]> {
  const folders: string[] = [];
  const settings = await readFile(path.join(home, '.config', 'Jan', 'settings.json'), 'utf8').catch(() => null);
  if (settings !== null) {
    try {
      const dataFolder = (JSON.parse(settings) as { data_folder?: unknown }).data_folder;
      if (typeof dataFolder === 'string' && path.isAbsolute(dataFolder)) folders.push(dataFolder);
    } catch {
      // A damaged settings file: the default folders still apply.
    }
  }
  folders.push(path.join(home, 'jan'), path.join(home, '.local', 'share', 'Jan', 'data'));
  return folders;
}

/** Jan: GGUF files under `models/` and `llamacpp/models/`, named by their model folder (`<id>/model.gguf` → `<id>`). */
async function scanJan(root: string): Promise<ModelCandidate[]> {
  const out: ModelCandidate[] = [];
  for (const sub of [path.join(root, 'models'), path.join(root, 'llamacpp', 'models')]) {
    out.push(...(await ggufFiles(sub, 'jan', (rel) => (/^model\.gguf$/i.test(path.basename(rel)) && path.dirname(rel) !== '.' ? path.dirname(rel) : rel.replace(/\.gguf$/i, '')))));
  }
  return out;
}

/** The Hugging Face hub cache: each `models--org--name` repository's current snapshot. */
async function scanHuggingFace(root: string): Promise<ModelCandidate[]> {
  const out: ModelCandidate[] = [];
  for (const repo of await readdir(root).catch(() => [] as string[])) {
    const m = /^models--(.+?)--(.+)$/.exec(repo);
    if (!m) continue;
    const repoName = `${m[1]}/${m[2]}`;
    const snapshot = await currentSnapshot(path.join(root, repo));
    if (!snapshot) continue;
    const names = await readdir(snapshot).catch(() => [] as string[]);
    if (folderFormat(names) === 'safetensors') out.push({ path: snapshot, name: repoName, source: 'huggingface', format: 'safetensors' });
    out.push(...(await ggufFiles(snapshot, 'huggingface', (rel) => `${repoName}/${rel.replace(/\.gguf$/i, '')}`)));
  }
  return out;
}

/** A repository's snapshot folder: the one `refs/main` names, else the newest; null when none. */
async function currentSnapshot(repo: string): Promise<string | null> {
  const snapshots = path.join(repo, 'snapshots');
  const ref = (await readFile(path.join(repo, 'refs', 'main'), 'utf8').catch(() => '')).trim();
  if (/^[0-9a-f]{7,64}$/.test(ref) && (await isDir(path.join(snapshots, ref)))) return path.join(snapshots, ref);
  let newest: { p: string; t: number } | null = null;
  for (const rev of await readdir(snapshots).catch(() => [] as string[])) {
    const st = await stat(path.join(snapshots, rev)).catch(() => null);
    if (st?.isDirectory() && (!newest || st.mtimeMs > newest.t)) newest = { p: path.join(snapshots, rev), t: st.mtimeMs };
  }
  return newest?.p ?? null;
}

/** GGUF files under `root` (vision projectors `mmproj*` left out: they are not chat models). */
async function ggufFiles(root: string, source: ModelCandidate['source'], name: (rel: string) => string): Promise<ModelCandidate[]> {
  const out: ModelCandidate[] = [];
  await walk(root, async (full, entry) => {
    if (entry === 'file' && isGguf(full) && !/^mmproj/i.test(path.basename(full))) {
      out.push({ path: full, name: name(path.relative(root, full)), source, format: 'gguf' });
    }
    return true;
  });
  return out;
}

/** What a folder holding these entries is as a model, or null. */
function folderFormat(names: string[]): LibraryFormat | null {
  if (names.includes('manifest.json') && names.includes('model.onnx')) return 'bundle';
  if (names.includes('config.json') && names.some((n) => n.endsWith('.safetensors'))) return 'safetensors';
  return null;
}

const isGguf = (p: string) => /\.gguf$/i.test(p);

async function isDir(p: string): Promise<boolean> {
  return (await stat(p).catch(() => null))?.isDirectory() ?? false;
}

/**
 * Depth-first walk below `root` (itself not visited). `visit(path, 'dir', entries)` returns
 * whether to descend; files are visited as `visit(path, 'file', their folder's entries)`. Hidden
 * entries, links to folders and unreadable folders are skipped; at most MAX_DEPTH levels and
 * MAX_ENTRIES entries.
 */
async function walk(root: string, visit: (full: string, entry: 'dir' | 'file', names?: string[]) => Promise<boolean>): Promise<void> {
  let budget = MAX_ENTRIES;
  const descend = async (dir: string, depth: number): Promise<void> => {
    const entries: Dirent[] = await readdir(dir, { withFileTypes: true }).catch(() => []);
    const names = entries.map((e) => e.name);
    for (const e of entries.sort((a, b) => a.name.localeCompare(b.name))) {
      if (--budget < 0) return;
      if (e.name.startsWith('.')) continue;
      const full = path.join(dir, e.name);
      let isFile = e.isFile();
      if (e.isSymbolicLink()) isFile = (await stat(full).catch(() => null))?.isFile() ?? false; // links to folders are not followed
      if (isFile) {
        await visit(full, 'file', names);
      } else if (e.isDirectory() && depth < MAX_DEPTH) {
        const inner = await readdir(full).catch(() => null);
        if (inner !== null && (await visit(full, 'dir', inner))) await descend(full, depth + 1);
      }
    }
  };
  await descend(root, 1);
}
