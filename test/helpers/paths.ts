/** Paths tests use: the real stories260K model where it lies beside the project (never copied in). */
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const STORIES_DIR = path.resolve(PROJECT_ROOT, '..', 'shared', 'models', 'stories260K');
export const STORIES_BIN = path.join(STORIES_DIR, 'stories260K.bin');
export const STORIES_TOKENIZER = path.join(STORIES_DIR, 'tok512.bin');
export const STORIES_GGUF = path.join(STORIES_DIR, 'stories260K.gguf');
/** Quantized copies of stories260K and the dequantization fixtures (see its README). */
export const GGUF_DIR = path.resolve(PROJECT_ROOT, '..', 'shared', 'models', 'gguf');
