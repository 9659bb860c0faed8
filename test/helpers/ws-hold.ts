/**
 * The window's view of an answer held mid-stream: the page's WebSocket is routed through
 * Playwright (`page.routeWebSocket`), and once `arm()`ed, every server frame after the answer's
 * first text is held in the route until `release()`, then delivered in order. Page → server
 * frames always pass (a Stop reaches the services at once). An answer on the embedded model
 * streams for about two seconds; a test that must act while it streams (click Stop mid-answer)
 * holds it instead of racing it (a CI run found the answer over before the click landed).
 * Install before the page opens its socket (before `goto`).
 */
import type { Page, WebSocketRoute } from 'playwright-core';

export interface AnswerHold {
  /** From the next answer text on, server frames are held. */
  arm(): void;
  /** True once a frame is held (the window shows the answer mid-stream and stays so). */
  readonly holding: boolean;
  /** Delivers what was held, in order, and passes frames again. */
  release(): void;
}

/** Routes the page's `/ws` socket through a hold (see the file comment). */
export async function holdAnswerFrames(page: Page): Promise<AnswerHold> {
  let armed = false;
  let holding = false;
  const held: string[] = [];
  let route: WebSocketRoute | null = null;
  await page.routeWebSocket(/\/ws$/, (ws) => {
    route = ws;
    const server = ws.connectToServer();
    server.onMessage((m) => {
      const text = typeof m === 'string' ? m : m.toString('utf8');
      if (holding) {
        held.push(text);
        return;
      }
      ws.send(text);
      if (!armed) return;
      const f = JSON.parse(text) as { kind?: string; event?: string; data?: { text?: string } };
      if (f.kind === 'event' && f.event === 'answerDelta' && f.data?.text) holding = true;
    });
  });
  return {
    arm: () => void (armed = true),
    get holding() {
      return holding;
    },
    release() {
      armed = holding = false;
      for (const f of held.splice(0)) route?.send(f);
    },
  };
}
