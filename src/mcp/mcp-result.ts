/**
 * What an MCP tool's result is to a template's facts and labels (SPEC section 11): its
 * `structuredContent` when the server gave one; else its text (the text blocks, joined) read as
 * JSON where it is JSON; else that text; and a result without text is its content blocks.
 */

/** The value facts and labels read of an MCP `tools/call` result. */
export function mcpResultValue(result: unknown): unknown {
  if (typeof result !== 'object' || result === null) return result;
  const { structuredContent, content } = result as { structuredContent?: unknown; content?: unknown };
  if (structuredContent !== undefined && structuredContent !== null) return structuredContent;
  if (!Array.isArray(content)) return result;
  const texts = content.flatMap((block: unknown) => {
    const { type, text } = (block ?? {}) as { type?: unknown; text?: unknown };
    return type === 'text' && typeof text === 'string' ? [text] : [];
  });
  if (texts.length === 0) return content;
  const text = texts.join('\n');
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}
