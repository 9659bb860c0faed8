/**
 * Documents in the store: stored once per content (SHA-256 of the file), linked to the user
 * messages that carry them (`attachments`, with how each is fitted into the prompt). A document
 * goes when its last attachment goes (a trigger); until a message carries it, it is a draft.
 * Errors: ServiceError NOT_FOUND for an unknown document.
 */
import type Database from 'better-sqlite3';
import { createHash, randomUUID } from 'node:crypto';
import type { AttachedDocument, DocumentFit } from '../../contract/types.ts';
import type { ExtractedDocument } from '../../documents/extract.ts';
import type { StoreDatabase } from './database.ts';
import { notFound, pageList, toStoredDocument, type Attachment, type DocumentRow, type StoredDocument } from './rows.ts';

/** The documents and attachments tables. */
export class DocumentTable {
  private readonly db: Database.Database;

  constructor(private readonly s: StoreDatabase) {
    this.db = s.db;
  }

  /**
   * Stores an extracted document, or returns the one with the same content (hash) already stored,
   * under this file's name (an attachment of it keeps that name; the stored row keeps the first).
   * Until a message carries it, it is a draft: `releaseDraftDocuments` removes drafts.
   */
  putDocument(d: Omit<ExtractedDocument, 'ocrPages' | 'pagesWithoutText'> & Partial<Pick<ExtractedDocument, 'ocrPages' | 'pagesWithoutText'>>): StoredDocument {
    const existing = this.db.prepare(`SELECT * FROM documents WHERE hash = ?`).get(d.hash) as DocumentRow | undefined;
    if (existing) return { ...toStoredDocument(existing), name: d.name };
    const row: DocumentRow = {
      id: randomUUID(),
      hash: d.hash,
      name: d.name,
      kind: d.kind,
      size: d.size,
      text: d.text,
      parts: JSON.stringify(d.parts),
      tokens: null,
      tokens_model: null,
      created_at: this.s.stamp(),
      ocr_pages: pageList(d.ocrPages),
      pages_without_text: pageList(d.pagesWithoutText),
    };
    this.db
      .prepare(
        `INSERT INTO documents (id, hash, name, kind, size, text, parts, tokens, tokens_model, created_at, ocr_pages, pages_without_text)
         VALUES (@id, @hash, @name, @kind, @size, @text, @parts, @tokens, @tokens_model, @created_at, @ocr_pages, @pages_without_text)`,
      )
      .run(row);
    return toStoredDocument(row);
  }

  /**
   * A document from an exported conversation (its text, not its file: no page labels). Stored
   * under its hash unless a document of that hash with other text is there (a file may claim any
   * hash): then under the hash of its text, so an import never shows another document's text.
   */
  importDocument(a: { name: string; kind: StoredDocument['kind']; hash: string; text: string }): StoredDocument {
    const doc = { name: a.name, kind: a.kind, size: Buffer.byteLength(a.text), hash: a.hash, text: a.text, parts: [] };
    const existing = this.db.prepare(`SELECT text FROM documents WHERE hash = ?`).pluck().get(a.hash) as string | undefined;
    if (existing === undefined || existing === a.text) return this.putDocument(doc);
    return this.putDocument({ ...doc, hash: createHash('sha256').update(`imported text\u0000${a.text}`).digest('hex') });
  }

  /** A stored document with its text. @throws ServiceError NOT_FOUND. */
  getDocument(id: string): StoredDocument {
    const row = this.db.prepare(`SELECT * FROM documents WHERE id = ?`).get(id) as DocumentRow | undefined;
    if (!row) throw notFound('document', id);
    return toStoredDocument(row);
  }

  /** A document's token count as counted by `model`, or null when that model has not counted it. */
  documentTokens(id: string, model: string): number | null {
    const row = this.db.prepare(`SELECT tokens FROM documents WHERE id = ? AND tokens_model = ?`).get(id, model) as { tokens: number | null } | undefined;
    return row?.tokens ?? null;
  }

  /** Records a document's token count as counted by `model` (a bundle folder). */
  setDocumentTokens(id: string, tokens: number, model: string): void {
    this.db.prepare(`UPDATE documents SET tokens = ?, tokens_model = ? WHERE id = ?`).run(tokens, model, id);
  }

  /**
   * Links documents to a user message, in order, with how each is fitted into the prompt and the
   * name of the file attached (when it differs from the stored document's).
   * @throws ServiceError NOT_FOUND for an unknown document.
   */
  attachDocuments(messageId: string, documents: readonly AttachedDocument[]): void {
    const put = this.db.prepare(`INSERT INTO attachments (message_id, document_id, position, fit, name) VALUES (?, ?, ?, ?, ?)`);
    this.db.transaction(() => {
      documents.forEach((d, i) => {
        const stored = this.getDocument(d.id);
        put.run(messageId, d.id, i, d.fit, d.name && d.name !== stored.name ? d.name : null);
      });
    })();
  }

  /** The documents a message carries, with their text, in order, each under its attachment's name. */
  attachmentsOf(messageId: string): Attachment[] {
    const rows = this.db
      .prepare(
        `SELECT d.*, COALESCE(a.name, d.name) AS name, a.fit AS fit FROM attachments a JOIN documents d ON d.id = a.document_id WHERE a.message_id = ? ORDER BY a.position`,
      )
      .all(messageId) as (DocumentRow & { fit: DocumentFit })[];
    return rows.map((r) => ({ document: toStoredDocument(r), fit: r.fit }));
  }

  /** Number of stored documents (drafts included). */
  countDocuments(): number {
    return (this.db.prepare(`SELECT COUNT(*) AS n FROM documents`).get() as { n: number }).n;
  }

  /** Removes documents no message carries (drafts of a composer that was never sent). @returns how many. */
  releaseDraftDocuments(): number {
    return this.db.prepare(`DELETE FROM documents WHERE id NOT IN (SELECT document_id FROM attachments)`).run().changes;
  }
}
