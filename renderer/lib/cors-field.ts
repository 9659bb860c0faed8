/**
 * The Local server's CORS field, checked as typed by the contract's origin rule (the services
 * check again): empty turns CORS off; anything else must be one origin.
 */
import { ORIGIN_RULE, parseOrigin } from '../../main/contract/origin.ts';

/** Why the CORS field's text is refused (null: empty or one origin). */
export function corsFieldError(text: string): string | null {
  if (text.trim() === '' || parseOrigin(text) !== null) return null;
  return `Must be ${ORIGIN_RULE}.`;
}
