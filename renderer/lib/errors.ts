/**
 * Errors as the window sees them: every failed call rejects with an `ApiError` carrying the
 * contract's stable `code` and one readable sentence. `describeError` turns anything thrown into
 * that shape for the banner, so no caller has to guess what it caught.
 */
import type { RopewalkApi } from '../../main/contract/channels.ts';
import { METHOD_NAMES } from '../../main/contract/names.ts';

export class ApiError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** { code, message } of anything thrown: an ApiError, an Error with a `code`, or a bare value. */
export function describeError(error: unknown): { code: string; message: string } {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return { code: typeof code === 'string' && code ? code : 'ERROR', message: error.message || 'Something went wrong.' };
  }
  if (error && typeof error === 'object' && typeof (error as { message?: unknown }).message === 'string') {
    const e = error as { code?: unknown; message: string };
    return { code: typeof e.code === 'string' ? e.code : 'ERROR', message: e.message };
  }
  return { code: 'ERROR', message: String(error) };
}

/**
 * The preload rejects with a plain `{ name, code, message }` object (contextBridge would strip
 * an Error's `code`); callers get an `ApiError` with the code, as from the WebSocket client.
 */
export function withErrorCodes(bridge: RopewalkApi): RopewalkApi {
  const wrapped: Record<string, unknown> = { on: bridge.on.bind(bridge) };
  for (const m of METHOD_NAMES) {
    const call = bridge[m] as (r: unknown) => Promise<unknown>;
    wrapped[m] = (request: unknown) =>
      call(request).catch((e: unknown) => {
        const { code, message } = describeError(e);
        throw new ApiError(code, message);
      });
  }
  return wrapped as RopewalkApi;
}
