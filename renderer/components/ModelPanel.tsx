/**
 * The model panel: name, architecture, trained context, weight formats with the bundle's size on
 * disk and the weights' resident bytes, execution provider in use (and why the preferred one is
 * not, if so), the GPU's name where it can be had, the compute nodes ONNX Runtime left on the
 * CPU (measured at load), load status and progress (the phase in the CLI's words: main/contract/load-phase.ts),
 * and "Open model…": a path field and a weights choice (as stored, or a float model's Linear
 * weights quantized to 8 or 4 bits, as the CLI's `--quantize q8|q4`) that call `openModel({ path, quantize })` (a native file dialog may
 * come later in the Electron shell), and the "Remote engine" source (RemoteEngineForm). With a
 * remote engine the card shows its server, how the meter counts, and how the API key is kept,
 * instead of weights and backends.
 */
import { useState, type FormEvent } from 'react';
import { loadPhaseWords } from '../../main/contract/load-phase.ts';
import type { ModelInfo, QuantizeOption } from '../../main/contract/types.ts';
import { useShallow } from 'zustand/react/shallow';
import { useModel, useStores } from '../hooks.ts';
import { loadErrorOf } from '../stores/model.ts';
import { formatBytes, formatTokens } from '../lib/meter.ts';
import { FormStatus } from './FormStatus.tsx';
import { ChipIcon } from './icons.tsx';
import { RemoteEngineForm } from './RemoteEngineForm.tsx';

const COUNTING = {
  server: "exact (the server's tokenizer)",
  tokenizer: 'exact (tokenizer.json)',
  estimate: 'an estimate (≈)',
} as const;
const KEY_KEPT = {
  none: 'none',
  encrypted: "kept encrypted by the system's keychain",
  memory: 'kept in memory only, until Ropewalk stops (no keychain here)',
} as const;

const EP_LABELS: Record<ModelInfo['executionProvider'], string> = { cpu: 'CPU', webgpu: 'WebGPU', cuda: 'CUDA' };

/** The model panel's words for `ModelInfo.nodesOnCpu` (ONNX Runtime's placement, measured at load). */
export function nodesOnCpuWords(ep: ModelInfo['executionProvider'], n: number | null): string {
  if (n === null) return 'not measured';
  if (ep === 'cpu') return `all (${formatTokens(n)})`;
  return n === 0 ? 'none: the whole graph runs on the GPU' : `${formatTokens(n)} (copies to and from the GPU around them)`;
}

export function ModelPanel() {
  const stores = useStores();
  const { model, opening } = useModel(useShallow((s) => ({ model: s.model, opening: s.opening })));
  const loadError = useModel(loadErrorOf);
  const [path, setPath] = useState('');
  const [quantize, setQuantize] = useState<QuantizeOption | ''>('');
  const info = model?.info ?? null;
  const loading = opening || model?.status === 'loading';

  const submit = (e: FormEvent) => {
    e.preventDefault();
    void stores.model.getState().open(path, quantize || null);
  };

  return (
    <section className="panel-section" aria-labelledby="model-heading">
      <h2 id="model-heading">Model</h2>
      <div className="model-card">
        <div className="model-title">
          <ChipIcon size={18} />
          <span className="model-name">{info?.name ?? (model ? 'No model loaded' : 'Loading…')}</span>
          {model && <span className={`badge status-${model.status}`}>{model.status}</span>}
        </div>
        {info?.remote && (
          <dl className="model-facts remote-facts">
            <dt>Engine</dt>
            <dd className="remote-url">Remote: {info.remote.baseUrl}</dd>
            <dt>Max context</dt>
            <dd>{formatTokens(info.maxContext)} tokens</dd>
            <dt>Token counts</dt>
            <dd className="remote-counting">{COUNTING[info.remote.counting]}</dd>
            <dt>API key</dt>
            <dd className="remote-key">{KEY_KEPT[info.remote.apiKey]}</dd>
          </dl>
        )}
        {info && !info.remote && (
          <dl className="model-facts">
            <dt>Architecture</dt>
            <dd>{info.architecture}</dd>
            <dt>Trained context</dt>
            <dd>{formatTokens(info.trainedContext)} tokens</dd>
            <dt>Weights</dt>
            <dd className="model-weights">{info.weights.formats}</dd>
            <dt>Size</dt>
            <dd>
              {formatBytes(info.weights.bundleBytes)} on disk · {formatBytes(info.weights.residentBytes)} resident
            </dd>
            <dt>Execution provider</dt>
            <dd>
              <span className="ep">{EP_LABELS[info.executionProvider]}</span>
            </dd>
            {info.executionProvider !== 'cpu' && (
              <>
                <dt>GPU</dt>
                <dd className="ep-adapter">{info.adapter ?? 'name not reported by ONNX Runtime'}</dd>
              </>
            )}
            <dt>Nodes on the CPU</dt>
            <dd className="ep-nodes-on-cpu">{nodesOnCpuWords(info.executionProvider, info.nodesOnCpu)}</dd>
            <dt>Backend</dt>
            <dd className="backend">{info.backend === 'native' ? 'Native' : 'JS'}</dd>
            {info.kvCacheDtype && (
              <>
                <dt>KV cache</dt>
                <dd className="kv-cache-dtype">{info.kvCacheDtype === 'float16' ? 'Float16' : 'Float32'}</dd>
              </>
            )}
          </dl>
        )}
        {info?.fallbackReason && <p className="ep-note">{info.fallbackReason}</p>}
        {model?.status === 'loading' && model.progress && (
          <div className="model-progress">
            <span className="model-phase">{loadPhaseWords(model.progress.phase)}</span>
            <progress aria-label="Model loading" max={1} value={model.progress.fraction} />
          </div>
        )}
      </div>
      <form className="open-model" onSubmit={submit}>
        <label htmlFor="model-path">Model path</label>
        <div className="open-model-row">
          <input
            id="model-path"
            placeholder="/path/to/model.bin or a Hugging Face folder"
            value={path}
            onChange={(e) => setPath(e.target.value)}
            spellCheck={false}
          />
          <button type="submit" className="btn btn-secondary btn-sm" disabled={loading}>
            Open model…
          </button>
        </div>
        <label htmlFor="model-quantize">Weights</label>
        <select id="model-quantize" value={quantize} onChange={(e) => setQuantize(e.target.value as QuantizeOption | '')}>
          <option value="">As stored</option>
          <option value="q8">Quantize to 8 bits (q8)</option>
          <option value="q4">Quantize to 4 bits (q4)</option>
        </select>
        <p className="field-hint">Quantizing applies to float weights (Hugging Face, llama2.c, F32/F16/BF16 GGUF; a quantized GGUF keeps its own blocks): about ¼ or ⅛ of their memory, imported once into a bundle of its own.</p>
        {info?.remote && <p className="field-hint">Opening a model here goes back to this computer's engine.</p>}
        <FormStatus busy={opening ? 'Opening the model…' : null} error={loadError} />
      </form>
      <RemoteEngineForm />
    </section>
  );
}
