/**
 * Settings: max context, max new tokens, sampling (temperature, top-k, top-p, min-p, repetition
 * penalty, seed), memory for kept KV caches, system prompt, what to do when the context is full, execution provider
 * preference. Each field is checked here against the contract's ranges (the services check
 * again) and saved on its own shortly after typing stops, or at once on blur / Enter.
 */
import { useState } from 'react';
import { CONTEXT_FULL_WORDS } from '../../main/contract/context-full.ts';
import type { ContextFullPolicy, Settings } from '../../main/contract/types.ts';
import { useModel, useOpenChatPolicy, useSettings, useStores } from '../hooks.ts';
import type { SettingsPatch } from '../stores/settings.ts';
import { Field, FIELDS, NumberField } from './fields.tsx';
import { LocalServerSection } from './LocalServerSection.tsx';
import { SaveStatus, SystemPromptField } from './SystemPromptPresets.tsx';

export function SettingsPanel() {
  const stores = useStores();
  const settings = useSettings((s) => s.settings);
  const saving = useSettings((s) => s.saving > 0);
  const savedAt = useSettings((s) => s.savedAt);
  const trainedContext = useModel((s) => s.model?.info?.trainedContext ?? null);
  const memory = useModel((s) => s.model?.info?.memory ?? null);
  const save = (patch: SettingsPatch) => stores.settings.getState().update(patch);

  if (!settings) return <section className="panel-section"><h2>Settings</h2><p className="muted">Loading…</p></section>;
  return (
    <section className="panel-section" aria-labelledby="settings-heading">
      <h2 id="settings-heading">
        Settings <SaveStatus id="settings-status" saving={saving} savedAt={savedAt} />
      </h2>
      <div className="field-grid">
        {FIELDS.map((f) => (
          <NumberField
            key={f.key}
            field={f}
            value={settings[f.key]}
            ctx={{ settings, trainedContext, memory }}
            onSave={(v) => save({ [f.key]: v } as SettingsPatch)}
          />
        ))}
      </div>
      <SystemPromptField value={settings.systemPrompt} presets={settings.systemPromptPresets} onSave={save} />
      {/* The chosen policy's hint, from the one table of the policies' words (main/contract/context-full.ts). */}
      <Field id="setting-context-full" label="When the context is full" hint={CONTEXT_FULL_WORDS[settings.contextFullPolicy].hint}>
        <select
          id="setting-context-full"
          value={settings.contextFullPolicy}
          onChange={(e) => void save({ contextFullPolicy: e.target.value as Settings['contextFullPolicy'] })}
        >
          <PolicyOptions />
        </select>
      </Field>
      <ChatPolicyField fallback={settings.contextFullPolicy} />
      <Field id="setting-ep" label="Execution provider" hint="Auto: CUDA, else WebGPU on a GPU, else CPU. The model panel shows the one in use, and why if it differs.">
        <select id="setting-ep" value={settings.executionProvider} onChange={(e) => void save({ executionProvider: e.target.value as Settings['executionProvider'] })}>
          <option value="auto">Auto</option>
          <option value="cpu">CPU</option>
          <option value="webgpu">WebGPU (any GPU: Vulkan, Direct3D 12, Metal)</option>
          <option value="cuda">CUDA (NVIDIA GPU)</option>
        </select>
      </Field>
      <Field id="setting-backend" label="Backend" hint="Native: the C++ addon (KV cache stays in place); JS: onnxruntime-node's API.">
        <select id="setting-backend" value={settings.backend} onChange={(e) => void save({ backend: e.target.value as Settings['backend'] })}>
          <option value="native">Native</option>
          <option value="js">JS</option>
        </select>
      </Field>
      <Field id="setting-kv-cache" label="KV cache" hint="Float16, the default, holds the same context in half the memory of Float32 (twice the max context in the same RAM), at no decode cost on the native backend (some on the JS backend); CPU only. A change reloads the model (no new import).">
        <select id="setting-kv-cache" value={settings.kvCacheDtype} onChange={(e) => void save({ kvCacheDtype: e.target.value as Settings['kvCacheDtype'] })}>
          <option value="float16">Float16 (half the memory)</option>
          <option value="float32">Float32</option>
        </select>
      </Field>
      <LocalServerSection onSave={save} />
    </section>
  );
}

/** The policies in the menus' order (the table's keys: stop, truncate the middle, rolling window). */
const POLICIES = Object.keys(CONTEXT_FULL_WORDS) as ContextFullPolicy[];

/** One <option> per context-full policy (value: the policy; text: its label; title: its hint), for both policy menus. */
function PolicyOptions() {
  return (
    <>
      {POLICIES.map((p) => (
        <option key={p} value={p} title={CONTEXT_FULL_WORDS[p].hint}>
          {CONTEXT_FULL_WORDS[p].label}
        </option>
      ))}
    </>
  );
}

/** The open chat's own context-full policy: "as the setting" (none of its own) or one of the three. */
function ChatPolicyField({ fallback }: { fallback: ContextFullPolicy }) {
  const stores = useStores();
  const { conversationId, own } = useOpenChatPolicy();
  const [savedAt, setSavedAt] = useState<number | null>(null);
  if (conversationId === null) return null;
  const choose = async (policy: ContextFullPolicy | null) => {
    if (await stores.conversations.getState().setPolicy(conversationId, policy)) setSavedAt(Date.now());
  };
  return (
    <Field
      id="setting-chat-policy"
      label="This chat, when full"
      hint={own ? `${CONTEXT_FULL_WORDS[own].hint} (This chat only.)` : 'Overrides the setting above for the open chat only.'}
    >
      <select
        id="setting-chat-policy"
        value={own ?? ''}
        onChange={(e) => void choose((e.target.value || null) as ContextFullPolicy | null)}
      >
        <option value="">As the setting ({CONTEXT_FULL_WORDS[fallback].label})</option>
        <PolicyOptions />
      </select>
      <SaveStatus id="chat-policy-status" saving={false} savedAt={savedAt} />
    </Field>
  );
}

