/**
 * Reasoning apart from the answer: a reasoning model (Qwen3, the DeepSeek-R1 distills) writes its
 * thinking between its own markers (`<think>` … `</think>`) before the answer; gpt-oss writes it
 * as harmony's analysis channel (`<|channel|>analysis<|message|>` … `<|end|>`), then opens the
 * answer with a header (`<|start|>assistant<|channel|>final<|message|>`) that belongs to neither
 * part (`ReasoningMarkers.answerHeaders`: dropped where the answer begins, at the reply's start or
 * after the closing marker; any other header there, e.g. a tool call's
 * `<|start|>assistant<|channel|>commentary to=functions.NAME …`, stays content for the tool parser);
 * an answer a header opened ends at `answerEnd` (harmony's `<|end|>`, where a model does not write
 * the end token `<|return|>`): the reply is over there (`answerEnded`; the engine stops). This module finds
 * the markers a model uses (`reasoningMarkers`: from its chat template and vocabulary), whether
 * the rendered prompt already opened the block (`promptOpensReasoning`: R1 distill templates end
 * the prompt with `<think>\n`, so the model writes only `</think>`), and splits the generated text
 * stream into reasoning and content (`ReasoningSplitter`), never taking text back:
 *   - reasoning opens only at the very start of the reply (after whitespace) or in the prompt; a
 *     reply that does not open with the marker is all content, markers later in it included;
 *   - a marker split across tokens or text deltas is held back until it is complete or ruled out;
 *   - an unclosed block (the reply was cut off) is all reasoning;
 *   - the whitespace around the markers (Qwen3 writes `<think>\n…\n</think>\n\n`) belongs to
 *     neither part, as vLLM's and llama.cpp's parsers strip it; text inside is kept as written.
 * So the concatenation of every reasoning delta is `reasoning`, of every content delta `content`.
 * Text in, text out: the engine feeds it the text that passed the stop strings (generation.ts).
 */
import type { TextTokenizer } from '../tokenizer/tokenizer.ts';

/** The two strings a model writes around its reasoning. */
export interface ReasoningMarkers {
  open: string;
  close: string;
  /** The template text that says a model uses this pair (its closing marker where unambiguous). */
  signature: string;
  /** Headers that open the answer where it begins (at the start or after `close`): dropped. */
  answerHeaders?: readonly string[];
  /** What ends an answer opened by one of `answerHeaders`: the reply ends there (`answerEnded`), nothing after it shown. */
  answerEnd?: string;
  /** The markers are special tokens' text: the stream must keep special tokens for them to be seen. */
  special?: boolean;
  /** How the model writes a block (for a reply continued from text, `writtenReply`): inside the markers around the reasoning, and between the block and the answer. */
  inner: string;
  between: string;
}

/** Which part of the reply a piece of text belongs to. */
export type ReplyPart = 'reasoning' | 'content';

export interface PartDelta {
  part: ReplyPart;
  text: string;
}

/** `<think>` … `</think>`: Qwen3, QwQ, DeepSeek-R1 and its distills. */
export const THINK_MARKERS: ReasoningMarkers = { open: '<think>', close: '</think>', signature: '</think>', inner: '\n', between: '\n\n' };

/**
 * gpt-oss's harmony format (openai/gpt-oss's chat template; OpenAI's harmony response format):
 * the analysis channel is the reasoning, the final channel the answer. `<|end|>` alone would not
 * identify it (Phi-3 ends turns with it), so the analysis header is the signature.
 */
export const HARMONY_MARKERS: ReasoningMarkers = {
  open: '<|channel|>analysis<|message|>',
  close: '<|end|>',
  signature: '<|channel|>analysis<|message|>',
  answerHeaders: ['<|start|>assistant<|channel|>final<|message|>', '<|channel|>final<|message|>'],
  // The final message ends with <|return|> (an end token); a model that ends it with <|end|> instead is done too.
  answerEnd: '<|end|>',
  special: true,
  inner: '',
  between: '<|start|>assistant<|channel|>final<|message|>',
};

/**
 * The start of a reply as the model writes it, from its reasoning and the answer so far: the block
 * closed and the answer after it (Qwen3: `<think>\n…\n</think>\n\nAnswer`; harmony: the analysis
 * message, then the final channel's header); without an answer the block left open.
 */
export function writtenReply(m: ReasoningMarkers, reasoning: string, answer: string): string {
  return answer ? `${m.open}${m.inner}${reasoning}${m.inner}${m.close}${m.between}${answer}` : `${m.open}${m.inner}${reasoning}`;
}

/** Marker pairs known from models' templates. */
const KNOWN_MARKERS: readonly ReasoningMarkers[] = [THINK_MARKERS, HARMONY_MARKERS];

/**
 * The reasoning markers of a model: a known pair whose signature its chat template writes or
 * whose two markers are single tokens of its vocabulary (an R1 distill's template may only strip
 * them); null for a model that does not reason (stories260K, Llama, Mistral).
 */
export function reasoningMarkers(tokenizer: Pick<TextTokenizer, 'chatTemplate' | 'tokenId'>): ReasoningMarkers | null {
  for (const m of KNOWN_MARKERS) {
    if (tokenizer.chatTemplate?.includes(m.signature)) return m;
    if (tokenizer.tokenId(m.open) !== undefined && tokenizer.tokenId(m.close) !== undefined) return m;
  }
  return null;
}

/**
 * True when `promptTail` (the end of the rendered prompt) leaves a reasoning block open: its last
 * opening marker comes after its last closing one and only whitespace follows it. Qwen3's prompt
 * with `enable_thinking: false` ends `<think>\n\n</think>\n\n`: closed, so false.
 */
export function promptOpensReasoning(promptTail: string, m: ReasoningMarkers): boolean {
  const open = promptTail.lastIndexOf(m.open);
  return open >= 0 && open > promptTail.lastIndexOf(m.close) && promptTail.slice(open + m.open.length).trim() === '';
}

type State = 'start' | 'reasoning' | 'content';

/** Splits a reply's text stream into reasoning and content deltas (see the file comment). */
export class ReasoningSplitter {
  /** All reasoning / content text emitted so far. */
  reasoning = '';
  content = '';
  private state: State;
  /** Text not emitted yet: a possible marker start, or whitespace that may precede a marker. */
  private held = '';
  /** Drop leading whitespace of the part now being written (right after a marker). */
  private trimLead = false;
  private closedFlag = false;
  /** The answer has not begun yet: an answer header may still open it (markers with `answerHeaders`). */
  private headerPending: boolean;
  /** Inside an answer an answer header opened (it ends at `answerEnd`). */
  private inHeadedAnswer = false;
  private endedFlag = false;

  /**
   * `markers`: the model's (null: everything is content). `openInPrompt`: the prompt already
   * opened the block (`promptOpensReasoning`), so the reply starts inside it. `midway`: the
   * prompt holds reasoning already (a continued reply), so the reply's leading whitespace is its
   * text, not the marker's.
   */
  constructor(private readonly markers: ReasoningMarkers | null, openInPrompt = false, midway = false) {
    this.state = markers === null ? 'content' : openInPrompt ? 'reasoning' : 'start';
    this.trimLead = openInPrompt && !midway;
    this.headerPending = !openInPrompt && (markers?.answerHeaders?.length ?? 0) > 0;
  }

  /** The part text written now goes to ('content' while it is still undecided at the start). */
  get part(): ReplyPart {
    return this.state === 'reasoning' ? 'reasoning' : 'content';
  }

  /** Whether the reply had a reasoning block (open now or closed). */
  get reasoned(): boolean {
    return this.state === 'reasoning' || this.closedFlag;
  }

  /** Whether the answer's end (`ReasoningMarkers.answerEnd`) has been seen: the reply is over. */
  get answerEnded(): boolean {
    return this.endedFlag;
  }

  /** Whether the closing marker has been seen. */
  get closed(): boolean {
    return this.closedFlag;
  }

  /** Takes the next text of the reply; returns the deltas that are safe to show now, in order. */
  push(text: string): PartDelta[] {
    const out: PartDelta[] = [];
    if (this.endedFlag) return out;
    this.held += text;
    if (this.state === 'start') this.decideStart();
    if (this.state === 'reasoning') this.takeReasoning(out);
    if (this.state === 'content' && this.headerPending) this.takeHeader();
    if (this.state === 'content' && this.inHeadedAnswer) this.takeHeadedAnswer(out);
    else if (this.state === 'content' && this.held && !this.headerPending) this.emit(out, 'content', this.takeHeld());
    return out;
  }

  /** The end of the reply: whatever is held, in the part it was in (an unclosed block is reasoning). */
  flush(): PartDelta[] {
    const out: PartDelta[] = [];
    const part = this.part;
    const rest = part === 'reasoning' ? this.takeHeld().trimEnd() : this.takeHeld();
    this.emit(out, part, rest);
    return out;
  }

  /** At the start: open the block on the marker, wait while the text may still become it, else content. */
  private decideStart(): void {
    const m = this.markers!;
    const lead = this.held.trimStart();
    if (lead.startsWith(m.open)) {
      this.state = 'reasoning';
      this.held = lead.slice(m.open.length);
      this.trimLead = true;
    } else if (!m.open.startsWith(lead)) {
      this.state = 'content';
    }
  }

  /** Where the answer begins: drop an answer header, wait while the text may still become one, else stop looking. */
  private takeHeader(): void {
    const headers = this.markers?.answerHeaders ?? [];
    const lead = this.held.trimStart();
    const header = headers.find((h) => lead.startsWith(h));
    if (header) {
      this.held = lead.slice(header.length);
      this.headerPending = false;
      this.trimLead = true;
      this.inHeadedAnswer = this.markers?.answerEnd !== undefined;
    } else if (!headers.some((h) => h.startsWith(lead))) {
      this.headerPending = false;
    }
  }

  /** Inside the block: emit up to the closing marker (or up to what may start it), then switch to content. */
  private takeReasoning(out: PartDelta[]): void {
    const m = this.markers!;
    const at = this.held.indexOf(m.close);
    if (at >= 0) {
      this.emit(out, 'reasoning', this.held.slice(0, at).trimEnd());
      this.held = this.held.slice(at + m.close.length);
      this.state = 'content';
      this.closedFlag = true;
      this.trimLead = true;
      this.headerPending = (m.answerHeaders?.length ?? 0) > 0;
      return;
    }
    const keep = heldTail(this.held, m.close);
    this.emit(out, 'reasoning', this.held.slice(0, this.held.length - keep));
    this.held = this.held.slice(this.held.length - keep);
  }

  /** In an answer a header opened: emit up to its end marker (or up to what may start it); at the marker the reply is over. */
  private takeHeadedAnswer(out: PartDelta[]): void {
    const end = this.markers!.answerEnd!;
    const at = this.held.indexOf(end);
    if (at >= 0) {
      this.emit(out, 'content', this.held.slice(0, at));
      this.held = '';
      this.endedFlag = true;
      return;
    }
    const keep = heldTail(this.held, end);
    this.emit(out, 'content', this.held.slice(0, this.held.length - keep));
    this.held = this.held.slice(this.held.length - keep);
  }

  private takeHeld(): string {
    const t = this.held;
    this.held = '';
    return t;
  }

  /** Appends `text` to `part` (leading whitespace dropped right after a marker) and to `out`. */
  private emit(out: PartDelta[], part: ReplyPart, text: string): void {
    if (this.trimLead) {
      text = text.trimStart();
      if (!text) return;
      this.trimLead = false;
    }
    if (!text) return;
    if (part === 'reasoning') this.reasoning += text;
    else this.content += text;
    const last = out.at(-1);
    if (last?.part === part) last.text += text;
    else out.push({ part, text });
  }
}

/**
 * Length of the tail of `text` to hold back inside the block: trailing whitespace followed by a
 * proper prefix of `close` (possibly empty), because it may turn out to precede the marker.
 */
function heldTail(text: string, close: string): number {
  let n = 0;
  for (let k = Math.min(close.length - 1, text.length); k > 0; k--) {
    if (close.startsWith(text.slice(text.length - k))) {
      n = k;
      break;
    }
  }
  let i = text.length - n;
  while (i > 0 && /\s/.test(text[i - 1]!)) i--;
  return text.length - i;
}
