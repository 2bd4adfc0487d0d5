/**
 * Keeps the newest message of the chat in view as it streams ("stick to bottom"), unless the
 * reader scrolled away to read something; scrolling back to the end follows again, and sending
 * a question always does. The chat log scrolls by itself where the page is an app shell (wide
 * screens); on a phone the page is the only scroll area, and then the page follows.
 */
import { type RefObject, useEffect, useRef } from 'react';

/** How close to the end (in pixels) still counts as being at the end. */
const NEAR_END = 80;

/** Follows the chat; `panel` ends with the composer, `log` holds the messages, `content` is inside it. */
export function useFollowChat(
  panel: RefObject<HTMLElement | null>,
  log: RefObject<HTMLElement | null>,
  content: RefObject<HTMLElement | null>,
  messageCount: number,
  lastRole: string | undefined,
): void {
  const stuck = useRef(true);
  const hasMessages = useRef(false);
  hasMessages.current = messageCount > 0;
  const follow = useRef<(() => void) | null>(null);

  useEffect(() => {
    const panelElement = panel.current;
    const logElement = log.current;
    const contentElement = content.current;
    if (!panelElement || !logElement || !contentElement) return;
    // Whether the log scrolls itself (decided by the stylesheet for the screen's width).
    const logScrolls = () => /auto|scroll/.test(getComputedStyle(logElement).overflowY);
    const position = () => (logScrolls() ? logElement.scrollTop : window.scrollY);
    // How far the end of the chat is below the visible area (negative: above it, on a page).
    const distance = () =>
      logScrolls()
        ? logElement.scrollHeight - logElement.scrollTop - logElement.clientHeight
        : panelElement.getBoundingClientRect().bottom - window.innerHeight;
    // Where this hook last scrolled to: the scroll event that follows is not the reader's.
    let scrolledTo: number | null = null;
    const toEnd = () => {
      if (logScrolls()) logElement.scrollTop = logElement.scrollHeight;
      else window.scrollBy(0, distance());
      scrolledTo = position();
    };
    follow.current = toEnd;
    const onScroll = () => {
      if (scrolledTo !== null && Math.abs(position() - scrolledTo) < 2) return;
      scrolledTo = null;
      stuck.current = Math.abs(distance()) < NEAR_END;
    };
    // Scrolling up by wheel or key says "let me read" at once, even if the transcript grows
    // before the scroll event arrives.
    const stop = () => {
      scrolledTo = null;
      stuck.current = false;
    };
    const onWheel = (event: WheelEvent) => {
      if (event.deltaY < 0) stop();
    };
    const onKey = (event: KeyboardEvent) => {
      if (event.key === 'PageUp' || event.key === 'ArrowUp' || event.key === 'Home') stop();
    };
    // Any growth of the transcript (a new part, a streamed word, an opened card) or of the log.
    const observer = new ResizeObserver(() => {
      if (stuck.current && hasMessages.current) toEnd();
    });
    observer.observe(contentElement);
    observer.observe(logElement);
    logElement.addEventListener('scroll', onScroll, { passive: true });
    window.addEventListener('scroll', onScroll, { passive: true });
    panelElement.addEventListener('wheel', onWheel, { passive: true });
    logElement.addEventListener('keydown', onKey);
    return () => {
      follow.current = null;
      observer.disconnect();
      logElement.removeEventListener('scroll', onScroll);
      window.removeEventListener('scroll', onScroll);
      panelElement.removeEventListener('wheel', onWheel);
      logElement.removeEventListener('keydown', onKey);
    };
  }, [panel, log, content]);

  // A question was just sent: show it and follow its answer, wherever the reader was.
  useEffect(() => {
    if (messageCount > 0 && lastRole === 'user') {
      stuck.current = true;
      follow.current?.();
    }
  }, [messageCount, lastRole]);
}
