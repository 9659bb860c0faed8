/**
 * Method and event names of the IPC contract, and their Electron channels. Dependency-free, so
 * the sandboxed preload and the renderer's WebSocket client can import it without zod.
 */
export const METHOD_NAMES = [
  'listConversations',
  'createConversation',
  'getConversation',
  'renameConversation',
  'setConversationPolicy',
  'setConversationThinking',
  'setConversationSettings',
  'deleteConversation',
  'sendMessage',
  'stopGeneration',
  'regenerate',
  'editMessage',
  'continueAnswer',
  'editAnswer',
  'deleteMessage',
  'getBudget',
  'attachDocument',
  'stopAttaching',
  'openDocument',
  'getSettings',
  'updateSettings',
  'getModel',
  'getLocalServer',
  'openModel',
  'listRemoteModels',
  'connectRemote',
  'selectBranch',
  'importConversation',
  'listModels',
  'chooseModelFile',
] as const;

export const EVENT_NAMES = ['answerDelta', 'answerWaiting', 'answerPrefill', 'answerDone', 'answerSaveState', 'budgetChanged', 'modelState', 'conversationsChanged', 'documentProgress'] as const;

export type MethodName = (typeof METHOD_NAMES)[number];
export type EventName = (typeof EVENT_NAMES)[number];

/** IPC channel of a method in the Electron transport. */
export const channelOf = (name: MethodName): string => `ropewalk:${name}`;
/** One channel carries every event: payload { event, data }. */
export const EVENT_CHANNEL = 'ropewalk:event';

/** Whether `x` names a method of the contract (the router and the preload check it). */
export function isMethodName(x: unknown): x is MethodName {
  return typeof x === 'string' && (METHOD_NAMES as readonly string[]).includes(x);
}
