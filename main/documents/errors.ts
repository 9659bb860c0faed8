/**
 * The one error type of documents: a stable `code` and one sentence that starts with the file's
 * name, so a person (or the CLI's one-line stderr) knows which attachment failed and why.
 * Thrown by extraction and by the document service; nothing is stored when one is thrown.
 */

import { CodedError } from '../common/errors.ts';

export type DocumentErrorCode =
  | 'DOCUMENT_NO_TEXT'
  | 'DOCUMENT_ENCRYPTED'
  | 'DOCUMENT_CORRUPT'
  | 'DOCUMENT_UNSUPPORTED'
  | 'DOCUMENT_TOO_LARGE'
  | 'DOCUMENT_UNREADABLE'
  /** Stopped by the user (an AbortSignal) while it was being read. */
  | 'DOCUMENT_CANCELLED';

/** An attachment that cannot be used; `file` is its name as given, `message` names it too. */
export class DocumentError extends CodedError<DocumentErrorCode> {
  constructor(
    code: DocumentErrorCode,
    readonly file: string,
    reason: string,
  ) {
    super(code, `${file}: ${reason}`);
  }
}
