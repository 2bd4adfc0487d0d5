/**
 * The agent's answers as Markdown (GitHub's flavour: tables, task lists, strikethrough), rendered
 * by react-markdown into React elements. While an answer streams, `remend` (the streaming repair
 * of Vercel's Streamdown) first closes what is still open, an unfinished `**`, code span or link,
 * so half an answer renders as it will look, not as stray asterisks.
 *
 * Why not Streamdown itself: it always bundles an HTML parser (for raw HTML, which this page must
 * not render) and Tailwind class names this page does not use; it tripled the page's script.
 *
 * What a model writes is untrusted: raw HTML is shown as the text it is, never parsed (react-markdown
 * turns it into text unless told otherwise, and no rehype-raw is here); links work
 * only for http(s) and open in a new tab without a referrer; images are never loaded (an image URL
 * is a request to wherever the model points, which can carry the conversation away in its query),
 * their alt text shows instead.
 */
import { useMemo } from 'react';
import ReactMarkdown, { type Components, defaultUrlTransform } from 'react-markdown';
import remarkGfm from 'remark-gfm';
import remend from 'remend';

const REMARK_PLUGINS = [remarkGfm];

/** Only http(s) links survive; anything else (`javascript:`, `data:`, relative) becomes no link. */
function safeUrl(url: string): string | undefined {
  return /^https?:\/\//i.test(url) ? defaultUrlTransform(url) : undefined;
}

const COMPONENTS: Components = {
  a: ({ href, children }) =>
    href ? (
      <a href={href} target="_blank" rel="noopener noreferrer nofollow">
        {children}
      </a>
    ) : (
      <span className="blocked-link">{children}</span>
    ),
  img: ({ alt }) => <span className="image-alt">{alt ? `[image: ${alt}]` : '[image]'}</span>,
  table: ({ children }) => (
    <div className="table-scroll">
      <table>{children}</table>
    </div>
  ),
};

/** Renders Markdown `text`; `live` while it is still streaming in. */
export function Markdown({ text, live = false }: { text: string; live?: boolean }) {
  const source = useMemo(() => (live ? remend(text) : text), [text, live]);
  return (
    <div className="markdown">
      <ReactMarkdown remarkPlugins={REMARK_PLUGINS} components={COMPONENTS} urlTransform={safeUrl}>
        {source}
      </ReactMarkdown>
    </div>
  );
}
