/**
 * A form's one status line: while `busy` names a step in progress, that step (role="status");
 * otherwise its last failure, if any (role="alert"). A failure is never shown beside the step
 * that may replace it. Used by the model panel's "Open model" form and its remote engine form.
 */

/**
 * The status line of a form.
 * @param busy the words for the step in progress (e.g. "Connecting…"), or null when idle.
 * @param error the last failure's message, shown only while idle; null or empty: none.
 */
export function FormStatus({ busy, error }: { busy: string | null; error: string | null | undefined }) {
  if (busy)
    return (
      <p className="field-hint" role="status">
        {busy}
      </p>
    );
  if (error)
    return (
      <p className="field-error" role="alert">
        {error}
      </p>
    );
  return null;
}
