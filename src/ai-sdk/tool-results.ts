/**
 * What a tool's result is to the template's facts and labels (SPEC section 11). An AI SDK tool's
 * result is what its `execute` returns; a tool set may say otherwise for its tools (`mcpTools()`
 * does: an MCP result is its structured content, else its text read as JSON, else its text).
 * Kept by tool object, so nothing is added to the tools the app hands the AI SDK.
 */
const readers = new WeakMap<object, (output: unknown) => unknown>();

/** Makes `read` turn what `tool`'s `execute` returns into the result its facts and labels read. */
export function readResultsWith(tool: object, read: (output: unknown) => unknown): void {
  readers.set(tool, read);
}

/** The result facts and labels read of `output`, what `tool`'s `execute` returned. */
export function resultOf(tool: object, output: unknown): unknown {
  const read = readers.get(tool);
  return read === undefined ? output : read(output);
}
