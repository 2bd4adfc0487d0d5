/**
 * A small Markdown renderer for answers: headings, paragraphs, lists, tables, block quotes,
 * code blocks, and inline code, bold, italics and links. It builds React elements (never
 * HTML strings), so a model's output cannot inject markup; links open only for http(s).
 */
import type { ReactNode } from 'react';

type Block =
  | { id: number; kind: 'heading'; level: number; text: string }
  | { id: number; kind: 'paragraph'; text: string }
  | { id: number; kind: 'quote'; text: string }
  | { id: number; kind: 'code'; text: string }
  | { id: number; kind: 'list'; ordered: boolean; items: { id: number; text: string }[] }
  | { id: number; kind: 'table'; head: string[]; rows: { id: number; cells: string[] }[] }
  | { id: number; kind: 'rule' };

const HEADING = /^(#{1,6})\s+(.*)$/;
const ITEM = /^\s*(?:([-*+])|(\d+)[.)])\s+(.*)$/;
const TABLE_SEPARATOR = /^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$/;
const RULE = /^\s*([-*_])(\s*\1){2,}\s*$/;

function cells(line: string): string[] {
  return line
    .trim()
    .replace(/^\|/, '')
    .replace(/\|$/, '')
    .split('|')
    .map((cell) => cell.trim());
}

/** Splits `text` into blocks; ids number every block and item, as React keys. */
function parseBlocks(text: string): Block[] {
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  const blocks: Block[] = [];
  let id = 0;
  let i = 0;
  while (i < lines.length) {
    const line = lines[i]!;
    if (line.trim() === '') {
      i++;
      continue;
    }
    if (line.trimStart().startsWith('```')) {
      const body: string[] = [];
      i++;
      while (i < lines.length && !lines[i]!.trimStart().startsWith('```')) body.push(lines[i++]!);
      i++; // the closing fence (absent while the answer is still streaming)
      blocks.push({ id: id++, kind: 'code', text: body.join('\n') });
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      blocks.push({ id: id++, kind: 'heading', level: heading[1]!.length, text: heading[2]! });
      i++;
      continue;
    }
    if (RULE.test(line)) {
      blocks.push({ id: id++, kind: 'rule' });
      i++;
      continue;
    }
    if (line.trimStart().startsWith('|') && TABLE_SEPARATOR.test(lines[i + 1] ?? '')) {
      const head = cells(line);
      const rows: { id: number; cells: string[] }[] = [];
      i += 2;
      while (i < lines.length && lines[i]!.trimStart().startsWith('|'))
        rows.push({ id: id++, cells: cells(lines[i++]!) });
      blocks.push({ id: id++, kind: 'table', head, rows });
      continue;
    }
    const item = ITEM.exec(line);
    if (item) {
      const ordered = item[2] !== undefined;
      const items: { id: number; text: string }[] = [];
      while (i < lines.length) {
        const next = ITEM.exec(lines[i]!);
        if (next && (next[2] !== undefined) === ordered) items.push({ id: id++, text: next[3]! });
        else if (lines[i]!.trim() !== '' && /^\s+/.test(lines[i]!) && items.length > 0)
          items[items.length - 1]!.text += ` ${lines[i]!.trim()}`;
        else break;
        i++;
      }
      blocks.push({ id: id++, kind: 'list', ordered, items });
      continue;
    }
    if (line.trimStart().startsWith('>')) {
      const body: string[] = [];
      while (i < lines.length && lines[i]!.trimStart().startsWith('>'))
        body.push(lines[i++]!.trimStart().replace(/^>\s?/, ''));
      blocks.push({ id: id++, kind: 'quote', text: body.join(' ') });
      continue;
    }
    const body: string[] = [];
    while (
      i < lines.length &&
      lines[i]!.trim() !== '' &&
      !HEADING.test(lines[i]!) &&
      !ITEM.test(lines[i]!) &&
      !lines[i]!.trimStart().startsWith('```')
    )
      body.push(lines[i++]!.trim());
    blocks.push({ id: id++, kind: 'paragraph', text: body.join(' ') });
  }
  return blocks;
}

// Code first, so that `**not bold**` inside code stays literal.
const INLINE =
  /`([^`]+)`|\*\*(.+?)\*\*|__(.+?)__|\*([^*\s][^*]*?)\*|(?<![\w])_([^_\s][^_]*?)_(?![\w])|\[([^\]]+)\]\(([^)\s]+)\)/;

/** Inline Markdown of one block as React nodes. */
function inline(text: string, keyPrefix: string): ReactNode[] {
  const nodes: ReactNode[] = [];
  let rest = text;
  let n = 0;
  while (rest) {
    const match = INLINE.exec(rest);
    if (!match) {
      nodes.push(rest);
      break;
    }
    if (match.index > 0) nodes.push(rest.slice(0, match.index));
    const key = `${keyPrefix}.${n++}`;
    const [whole, code, bold, bold2, italic, italic2, linkText, href] = match;
    if (code !== undefined) nodes.push(<code key={key}>{code}</code>);
    else if (bold !== undefined || bold2 !== undefined)
      nodes.push(<strong key={key}>{inline(bold ?? bold2 ?? '', key)}</strong>);
    else if (italic !== undefined || italic2 !== undefined)
      nodes.push(<em key={key}>{inline(italic ?? italic2 ?? '', key)}</em>);
    else if (linkText !== undefined && href !== undefined && /^https?:\/\//i.test(href))
      nodes.push(
        <a key={key} href={href} target="_blank" rel="noopener noreferrer">
          {inline(linkText, key)}
        </a>,
      );
    else nodes.push(whole);
    rest = rest.slice(match.index + whole.length);
  }
  return nodes;
}

function renderBlock(block: Block): ReactNode {
  const key = block.id;
  switch (block.kind) {
    case 'heading': {
      // Answers sit under the page's own h1-h3, so their headings start at h4.
      const level = Math.min(6, block.level + 3);
      const Tag = `h${level}` as 'h4' | 'h5' | 'h6';
      return <Tag key={key}>{inline(block.text, String(key))}</Tag>;
    }
    case 'paragraph':
      return <p key={key}>{inline(block.text, String(key))}</p>;
    case 'quote':
      return <blockquote key={key}>{inline(block.text, String(key))}</blockquote>;
    case 'code':
      return (
        <pre key={key} className="code">
          <code>{block.text}</code>
        </pre>
      );
    case 'rule':
      return <hr key={key} />;
    case 'list': {
      const items = block.items.map((item) => <li key={item.id}>{inline(item.text, String(item.id))}</li>);
      return block.ordered ? <ol key={key}>{items}</ol> : <ul key={key}>{items}</ul>;
    }
    case 'table':
      return (
        <div key={key} className="table-scroll">
          <table>
            <thead>
              <tr>
                {block.head.map((cell, column) => (
                  // biome-ignore lint/suspicious/noArrayIndexKey: a column is identified by its position
                  <th key={column}>{inline(cell, `${key}.h${column}`)}</th>
                ))}
              </tr>
            </thead>
            <tbody>
              {block.rows.map((row) => (
                <tr key={row.id}>
                  {row.cells.map((cell, column) => (
                    // biome-ignore lint/suspicious/noArrayIndexKey: a column is identified by its position
                    <td key={column}>{inline(cell, `${row.id}.${column}`)}</td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      );
  }
}

/** Renders Markdown `text` (safe: React elements only). */
export function Markdown({ text }: { text: string }) {
  return <div className="markdown">{parseBlocks(text).map(renderBlock)}</div>;
}
