/**
 * Imported first by `main.tsx`, before any module that loads Zod (the AI SDK does).
 *
 * The page's Content-Security-Policy (`src/server/routes/static.ts`) allows no eval. Zod probes
 * for it with `Function('')` the first time it parses an object, which the browser refuses and
 * reports as a console error (Zod then validates without compiling, as it does when jitless).
 * Zod reads its settings from `globalThis.__zod_globalConfig`, keeping an object already there,
 * so setting it before Zod loads makes it jitless from the start, with no probe.
 */
const global = globalThis as { __zod_globalConfig?: { jitless?: boolean } };
global.__zod_globalConfig = { ...global.__zod_globalConfig, jitless: true };

/**
 * Whether Zod runs jitless. `main.tsx` asks, which also keeps this module in the bundle: the
 * package declares `sideEffects: false`, so an import for its side effect alone is dropped.
 */
export function zodIsJitless(): boolean {
  return global.__zod_globalConfig?.jitless === true;
}
