/**
 * Stop strings over a text stream, without ever taking text back: text that could still be the
 * start of a stop string is held back until it cannot be (the next text rules it out, or the
 * stream ends), and a stop string cuts the text where it starts. So the concatenation of every
 * `push(...).text` and the final `flush()` is exactly the final text (`emitted`), for any stop
 * strings: several at once, one a prefix of another, spanning several tokens, CJK or emoji.
 *
 * Rule when several stop strings occur: the text ends where the earliest occurrence starts, at
 * the first push in which any stop string is complete (as OpenAI's and llama.cpp's servers do).
 * Strings are compared as UTF-16 code units; held-back text always ends before a stop string's
 * first character, so a well-formed stop string never splits a surrogate pair.
 * Cost per push: O(held + new text) · stops, with held < the longest stop string.
 */

/** The text of one push that is safe to show now, and whether a stop string ended the stream. */
export interface StopStep {
  text: string;
  stopped: boolean;
}

/** Holds back possible stop-string starts; `emitted` is always the final text so far. */
export class StopStrings {
  private readonly stops: string[];
  private held = '';
  private out = '';
  private ended = false;

  /** `stops`: the stop strings (empty strings are ignored). */
  constructor(stops: readonly string[] = []) {
    this.stops = stops.filter((s) => s.length > 0);
  }

  /** Text emitted so far (after a stop, the final text). */
  get emitted(): string {
    return this.out;
  }

  /** Whether a stop string has ended the stream (later pushes return nothing). */
  get stopped(): boolean {
    return this.ended;
  }

  /** Takes the next piece of text; returns what can be shown now. */
  push(text: string): StopStep {
    if (this.ended) return { text: '', stopped: true };
    if (this.stops.length === 0) return this.emit(text, false);
    const buffer = this.held + text;
    const cut = earliestStop(buffer, this.stops);
    if (cut >= 0) {
      this.held = '';
      this.ended = true;
      return this.emit(buffer.slice(0, cut), true);
    }
    const keep = longestStopPrefixSuffix(buffer, this.stops);
    this.held = buffer.slice(buffer.length - keep);
    return this.emit(buffer.slice(0, buffer.length - keep), false);
  }

  /** The end of the stream: returns the held-back text (nothing after a stop). */
  flush(): string {
    const rest = this.ended ? '' : this.held;
    this.held = '';
    return this.emit(rest, this.ended).text;
  }

  private emit(text: string, stopped: boolean): StopStep {
    this.out += text;
    return { text, stopped };
  }
}

/** Index where the earliest stop string occurring in `text` starts, or −1. */
function earliestStop(text: string, stops: readonly string[]): number {
  let best = -1;
  for (const s of stops) {
    const i = text.indexOf(s);
    if (i >= 0 && (best < 0 || i < best)) best = i;
  }
  return best;
}

/** Length of the longest suffix of `text` that is a proper prefix of some stop string (0: none). */
function longestStopPrefixSuffix(text: string, stops: readonly string[]): number {
  const longest = Math.max(...stops.map((s) => s.length)) - 1;
  for (let n = Math.min(longest, text.length); n > 0; n--) {
    const suffix = text.slice(text.length - n);
    if (stops.some((s) => s.length > n && s.startsWith(suffix))) return n;
  }
  return 0;
}
