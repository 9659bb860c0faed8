/**
 * The local API's refusal: an HTTP status, OpenAI's error code, the request field at fault
 * (`param`) and one sentence, written by the routes as OpenAI's `{ error: { … } }` body. Below the
 * request parsers and the routes, so both can throw it.
 */

/** A request the API refuses: HTTP status, OpenAI error code, the field at fault, one sentence. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly param: string | null = null,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'ApiError';
  }
}
