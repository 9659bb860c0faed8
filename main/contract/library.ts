/**
 * The model library as it crosses the contract: the models found on this machine (Ropewalk's
 * own models folder, and read-only the folders LM Studio, Ollama, Jan and the Hugging Face cache
 * keep), each with the facts its header gives and whether it fits this machine's memory at the
 * max context the load would use; and the models opened recently. Types only.
 */

/** Where a model was found: the embedded one, Ropewalk's models folder, or another app's folder. */
export const LIBRARY_SOURCES = ['builtin', 'ropewalk', 'lmstudio', 'ollama', 'jan', 'huggingface'] as const;
export type LibrarySource = (typeof LIBRARY_SOURCES)[number];

/** What the file or folder is (how Ropewalk imports it). */
export type LibraryFormat = 'gguf' | 'safetensors' | 'llama2c' | 'bundle';

/** The memory a model needs once loaded (the estimate the load itself checks), bytes. */
export interface LibraryMemory {
  /** The max context the estimate is for: the user's setting, else the model's trained context. */
  maxContext: number;
  weightBytes: number;
  /** KV cache at `maxContext` (float32 keys and values, every layer). */
  kvCacheBytes: number;
  totalBytes: number;
  /** Memory available to Ropewalk now. */
  availableBytes: number;
  fits: boolean;
}

/** One model on this machine. Facts are null where the header does not say (or cannot be read). */
export interface LibraryModel {
  /** What `openModel` takes: a file (GGUF, llama2.c, an Ollama blob) or a folder (Hugging Face, bundle). */
  path: string;
  /** As the app that keeps it names it: `name:tag` (Ollama), `org/repo` (Hugging Face), `publisher/repo/file` (LM Studio). */
  name: string;
  source: LibrarySource;
  format: LibraryFormat;
  /** e.g. `llama`, `qwen3`. */
  architecture: string | null;
  /** GGUF file type (`Q4_K_M`, `Q8_0`, `F16`…) or the safetensors dtype (`BF16`). */
  quantization: string | null;
  parameterCount: number | null;
  /** Size on disk, bytes (a folder: its weight files and configs). */
  fileBytes: number;
  trainedContext: number | null;
  memory: LibraryMemory | null;
  /** Why Ropewalk cannot run it (an unsupported architecture, an unreadable header); null: it can. */
  problem: string | null;
}

/** A model opened before (most recent first); `name` as it was listed then. */
export interface RecentModel {
  path: string;
  name: string;
  /** ms since the epoch. */
  openedAt: number;
}

/** A folder the library looked in. */
export interface LibraryRoot {
  source: Exclude<LibrarySource, 'builtin'>;
  path: string;
  /** false: the folder does not exist (that app is not installed, or keeps its models elsewhere). */
  found: boolean;
}

export interface ModelLibrary {
  models: LibraryModel[];
  recent: RecentModel[];
  roots: LibraryRoot[];
  /** How long the scan took, ms. */
  scanMs: number;
}
