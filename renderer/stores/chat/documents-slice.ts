/**
 * Chat store slice: the documents attached in the composer (sent with the next message, then
 * shown as chips on it), files being extracted, and the document opened for reading. Files are
 * read here only as bytes (base64) and sent to the services, which extract the text in the main
 * process; an error names the file (a notice) and attaches nothing. Attaching, removing or
 * switching a document to its relevant parts recounts the budget (the meter's documents segment).
 */
import { partRange } from '../../lib/citations.ts';
import type { ChatSlice } from './context.ts';
import type { DocumentsSlice } from './types.ts';

/** Bytes as base64, in slices (String.fromCharCode on a whole file overflows the stack). */
export function toBase64(bytes: Uint8Array): string {
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

export const createDocumentsSlice: ChatSlice<DocumentsSlice> = (ctx) => (set, get) => ({
  attachments: [],
  attaching: [],
  progress: {},
  ocr: {},
  reading: null,

  onDocumentProgress({ name, fraction, phase }) {
    if (!get().attaching.includes(name)) return;
    set({ progress: { ...get().progress, [name]: fraction }, ...(phase === 'ocr' && !get().ocr[name] ? { ocr: { ...get().ocr, [name]: true } } : {}) });
  },

  stopAttaching(name) {
    ctx.deps.api.stopAttaching({ name }).catch((e: unknown) => ctx.report(e));
  },

  async attachFiles(files) {
    const conversationId = get().conversationId;
    for (const file of files) {
      set({ attaching: [...get().attaching, file.name] });
      try {
        const data = toBase64(new Uint8Array(await file.arrayBuffer()));
        const info = await ctx.deps.api.attachDocument({ name: file.name, data });
        if (get().conversationId === conversationId && !get().attachments.some((a) => a.id === info.id)) {
          set({ attachments: [...get().attachments, info], refusal: null });
          ctx.budget().schedule();
        }
      } catch (e) {
        // Stopped by the user: nothing to report.
        if ((e as { code?: string }).code !== 'DOCUMENT_CANCELLED') ctx.report(e);
      } finally {
        const i = get().attaching.indexOf(file.name);
        const attaching = get().attaching.filter((_, j) => j !== i);
        const progress = { ...get().progress };
        const ocr = { ...get().ocr };
        if (!attaching.includes(file.name)) (delete progress[file.name], delete ocr[file.name]);
        set({ attaching, progress, ocr });
      }
    }
  },

  removeAttachment(id) {
    set({ attachments: get().attachments.filter((a) => a.id !== id), refusal: null });
    ctx.budget().schedule();
  },

  setFit(fit) {
    set({ attachments: get().attachments.map((a) => ({ ...a, fit })), refusal: null });
    void ctx.budget().refresh();
  },

  clearAttachments() {
    set({ attachments: [], refusal: null });
    void ctx.budget().refresh();
  },

  async openDocument(id, at, name) {
    try {
      const stored = await ctx.deps.api.openDocument({ id });
      const doc = name ? { ...stored, name } : stored;
      const highlight = at && 'part' in at ? partRange(doc.parts, at.part, doc.text.length) : at;
      set({ reading: highlight ? { ...doc, highlight } : doc });
    } catch (e) {
      ctx.report(e);
    }
  },

  closeDocument() {
    set({ reading: null });
  },

  async documentTexts() {
    const ids = [...new Set(get().messages.flatMap((m) => (m.documents ?? []).map((d) => d.id)))];
    const texts = new Map<string, string>();
    await Promise.all(
      ids.map(async (id) => {
        const doc = await ctx.deps.api.openDocument({ id }).catch(() => null); // one that cannot be read exports without text
        if (doc) texts.set(id, doc.text);
      }),
    );
    return texts;
  },
});
