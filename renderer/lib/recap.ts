/**
 * A short summary of a conversation to start a new chat from, when the old one no longer fits
 * the max context: extractive, not written by the model (a model at its context limit cannot read
 * what it would summarize): the questions asked, latest first kept when they do not all fit, and
 * the beginning of the last answer, within `maxChars`. Pure.
 */
import type { Message } from '../../main/contract/types.ts';

/** Characters of one question, and of the last answer's beginning, kept at most. */
const QUESTION_CHARS = 160;
const ANSWER_CHARS = 240;

/** `text` with whitespace collapsed, cut at `max` characters with "…". */
function clip(text: string, max: number): string {
  const t = text.replace(/\s+/g, ' ').trim();
  return t.length <= max ? t : `${t.slice(0, max - 1).trimEnd()}…`;
}

/**
 * The summary: "Summary of an earlier chat:", one "- I asked: …" line per question (oldest
 * first; the oldest are left out, said in a line, when they do not fit), "- The last answer
 * began: …", then a blank line for the next message. '' for a conversation with no question.
 * @param maxChars the summary's length bound, characters (at least the header's and one line's).
 */
export function conversationRecap(messages: readonly Pick<Message, 'role' | 'content'>[], maxChars: number): string {
  const questions = messages.filter((m) => m.role === 'user' && m.content.trim()).map((m) => `- I asked: ${clip(m.content, QUESTION_CHARS)}`);
  if (questions.length === 0) return '';
  const answer = [...messages].reverse().find((m) => m.role === 'assistant' && m.content.trim());
  const head = 'Summary of an earlier chat:';
  const tail = answer ? [`- The last answer began: ${clip(answer.content, ANSWER_CHARS)}`] : [];
  const size = (lines: string[]) => lines.reduce((n, l) => n + l.length + 1, 0);
  let room = maxChars - size([head, ...tail]) - 2;
  const kept: string[] = [];
  for (let i = questions.length - 1; i >= 0 && room - (questions[i].length + 1) >= 0; i--) {
    kept.unshift(questions[i]);
    room -= questions[i].length + 1;
  }
  const left = questions.length - kept.length;
  const lines = [head, ...(left > 0 ? [`- (${left} earlier ${left === 1 ? 'question' : 'questions'} left out)`] : []), ...kept, ...tail];
  return `${lines.join('\n')}\n\n`;
}
