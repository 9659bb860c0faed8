/**
 * electron-builder.yml, checked without packaging (packaging downloads Electron): it passes
 * electron-builder's own schema, builds the targets the issue names, keeps native code outside the
 * asar, ships only dist/ and package.json, and copies the embedded model to where
 * main/common/default-model.ts looks in a packaged app.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { describe, it } from 'node:test';
import { defaultModelPath } from '../../main/common/default-model.ts';
import { addonCandidates, NATIVE_ADDON_FILE, PACKAGED_ADDON_FILE, unpackedPath } from '../../main/engine/model/native-addon.ts';
import { PROJECT_ROOT } from '../helpers/paths.ts';

const require = createRequire(import.meta.url);

interface BuilderConfig {
  files: Array<{ filter: string[] }>;
  asar: boolean;
  asarUnpack: string[];
  npmRebuild: boolean;
  extraResources: Array<{ from: string; to: string; filter: string[] }>;
  electronFuses: Record<string, boolean>;
  linux: { target: string[] };
  win: { target: string[] };
  mac: { target: string[] };
}

let loaded: Promise<BuilderConfig> | null = null;
/** The config as electron-builder reads it (normalised), after its schema validation. */
function loadConfig(): Promise<BuilderConfig> {
  return (loaded ??= readConfig());
}

async function readConfig(): Promise<BuilderConfig> {
  const { getConfig, validateConfiguration } = require('app-builder-lib/out/util/config/config') as {
    getConfig(dir: string, file: string, extra: null): Promise<unknown>;
    validateConfiguration(config: unknown, logger: unknown): Promise<void>;
  };
  const { DebugLogger } = require('builder-util') as { DebugLogger: new (enabled: boolean) => unknown };
  const config = await getConfig(PROJECT_ROOT, 'electron-builder.yml', null);
  await validateConfiguration(config, new DebugLogger(false)); // throws on any schema violation
  return config as BuilderConfig;
}

describe('electron-builder.yml', () => {
  it("passes electron-builder's schema and names the issue's targets", async () => {
    const c = await loadConfig();
    assert.deepEqual(c.linux.target, ['AppImage', 'deb']);
    assert.deepEqual(c.win.target, ['nsis']);
    assert.deepEqual(c.mac.target, ['dmg']);
  });

  it('ships dist/ and package.json only, native modules unpacked and rebuilt for Electron', async () => {
    const c = await loadConfig();
    assert.deepEqual(c.files.flatMap((f) => f.filter).filter((f) => !f.startsWith('!')), ['dist/**', 'package.json']);
    assert.equal(c.asar, true);
    assert.equal(c.npmRebuild, true);
    for (const pkg of ['onnxruntime-node', 'better-sqlite3']) assert.ok(c.asarUnpack.some((g) => g.includes(`node_modules/${pkg}/`)), pkg);
    assert.ok(c.asarUnpack.includes('**/*.node'));
    assert.equal(c.electronFuses.runAsNode, false);
    assert.equal(c.electronFuses.enableNodeOptionsEnvironmentVariable, false);
  });

  it('copies the embedded model to where the packaged app looks for it', async () => {
    const c = await loadConfig();
    const model = c.extraResources.find((r) => r.to === 'models/stories260K');
    assert.ok(model, 'extraResources has models/stories260K');
    for (const file of ['stories260K.bin', 'tok512.bin']) {
      assert.ok(model.filter.includes(file), file);
      assert.ok(existsSync(path.resolve(PROJECT_ROOT, model.from, file)), `${model.from}/${file} exists`);
    }
    // main/common/default-model.ts, packaged: process.resourcesPath/models/stories260K/stories260K.bin.
    const resources = path.resolve(PROJECT_ROOT, model.from, '..', '..');
    const proc = process as { resourcesPath?: string };
    const saved = { resources: proc.resourcesPath, env: process.env.ROPEWALK_DEFAULT_MODEL };
    delete process.env.ROPEWALK_DEFAULT_MODEL;
    proc.resourcesPath = resources;
    try {
      assert.equal(defaultModelPath(), path.join(resources, 'models', 'stories260K', 'stories260K.bin'));
    } finally {
      proc.resourcesPath = saved.resources;
      if (saved.env !== undefined) process.env.ROPEWALK_DEFAULT_MODEL = saved.env;
    }
  });

  it('copies the native addon into the resources folder, where the packaged worker looks first', async () => {
    const c = await loadConfig();
    const addon = c.extraResources.find((r) => r.to === PACKAGED_ADDON_FILE.split(path.sep).join('/'));
    assert.ok(addon, `extraResources has ${PACKAGED_ADDON_FILE}`);
    assert.equal(addon.from, NATIVE_ADDON_FILE.split(path.sep).join('/'), 'from where native/build.mjs writes it');
    const resources = path.join(path.sep, 'opt', 'Ropewalk', 'resources');
    const inAsar = path.join(resources, 'app.asar', 'dist', 'app');
    // Packaged: the resources folder (main process, or the env the app sets for its worker).
    assert.deepEqual(addonCandidates({}, resources, inAsar), [path.join(resources, 'native', 'ropewalk_native.node')]);
    assert.deepEqual(addonCandidates({ ROPEWALK_RESOURCES_PATH: resources }, undefined, inAsar), [path.join(resources, 'native', 'ropewalk_native.node')]);
    // A checkout: the build folder above the module; the override first.
    const here = path.join(PROJECT_ROOT, 'main', 'engine', 'model');
    const built = path.join(PROJECT_ROOT, NATIVE_ADDON_FILE);
    assert.deepEqual(addonCandidates({ ROPEWALK_NATIVE_ADDON: '/x.node' }, undefined, here), existsSync(built) ? ['/x.node', built] : ['/x.node']);
    // onnxruntime-node resolves inside app.asar; its shared library is read from the unpacked copy.
    assert.equal(unpackedPath('/opt/Ropewalk/resources/app.asar/node_modules/onnxruntime-node'), '/opt/Ropewalk/resources/app.asar.unpacked/node_modules/onnxruntime-node');
    assert.equal(unpackedPath('/home/me/ropewalk/node_modules/onnxruntime-node'), '/home/me/ropewalk/node_modules/onnxruntime-node');
  });
});
