/**
 * Builds the inspector into dist/web, which `baton serve` serves at `/`. Everything is bundled
 * (no CDN, no network fonts) so the page works on an offline machine.
 */
import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

// The directory of this file, so the build works from any working directory.
const root = decodeURIComponent(new URL('.', import.meta.url).pathname);
const api = 'http://127.0.0.1:4000';

export default defineConfig({
  root,
  // Relative asset URLs (`./assets/...`): the page works under any path prefix (`/baton/`).
  base: './',
  plugins: [react()],
  build: {
    outDir: '../dist/web',
    emptyOutDir: true,
    // One small app: a single chunk is simpler to serve and cache than a split one.
    chunkSizeWarningLimit: 1024,
  },
  server: {
    proxy: {
      '/api': api,
      '/healthz': api,
    },
  },
});
