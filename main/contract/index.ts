/** The IPC contract (see channels.ts and types.ts). */
export * from './channels.ts';
export type * from './types.ts';
export type * from './library.ts';
