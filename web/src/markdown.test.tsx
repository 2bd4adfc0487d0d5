/**
 * The answer renderer, rendered by React as the page renders it: Markdown becomes elements, and
 * nothing a model writes becomes markup, a script, a non-http link or a request for an image.
 */
import { renderToStaticMarkup } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import { Markdown } from './markdown.js';

const html = (text: string, live = false) => renderToStaticMarkup(<Markdown text={text} live={live} />);

describe('Markdown', () => {
  it('renders headings, emphasis, lists, code and GitHub tables as elements', () => {
    const out = html(
      '## Plan\n\n1. **search** first\n2. then `think`\n\n| tool | uses |\n|---|---|\n| search | 2 |\n\n```\ncode\n```',
    );
    expect(out).toContain('<h2>Plan</h2>');
    expect(out).toContain('<ol>');
    expect(out).toContain('<strong>search</strong>');
    expect(out).toContain('<code>think</code>');
    expect(out).toContain('<td>search</td>');
    expect(out).toContain('<pre><code>code\n</code></pre>');
  });

  it('shows raw HTML from the model as text, never as markup', () => {
    const out = html('<img src=x onerror=alert(1)> <script>alert(1)</script>\n\n<div onclick="steal()">hi</div>');
    expect(out).not.toMatch(/<(img|script|div onclick)/);
    expect(out).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(out).toContain('&lt;div onclick=&quot;steal()&quot;&gt;hi&lt;/div&gt;');
  });

  it('links only http(s), in a new tab without a referrer; other schemes are no link', () => {
    const out = html(
      '[ok](https://example.com/a) [js](javascript:alert(1)) [data](data:text/html,x) [rel](/api/agents)',
    );
    expect(out).toContain('<a href="https://example.com/a" target="_blank" rel="noopener noreferrer nofollow">ok</a>');
    expect(out.match(/<a /g)).toHaveLength(1);
    expect(out).not.toContain('javascript:');
    expect(out).toContain('<span class="blocked-link">js</span>');
  });

  it('never loads an image the model names: its alt text shows instead', () => {
    const out = html('![the chart](https://tracker.example/p.png?q=secret)');
    expect(out).not.toContain('<img');
    expect(out).not.toContain('tracker.example');
    expect(out).toContain('[image: the chart]');
  });

  it('while streaming, closes what is still open, so half an answer renders as it will look', () => {
    expect(html('Electric cars: **about 250 mill', true)).toContain('<strong>about 250 mill</strong>');
    expect(html('Use `sea', true)).toContain('<code>sea</code>');
    // Once the answer is complete it is rendered as written.
    expect(html('a **b')).toContain('a **b');
  });
});
