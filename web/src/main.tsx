/**
 * Entry point of the inspector: mounts the app into #root.
 */
// biome-ignore-all assist/source/organizeImports: zod-jitless.js goes first, before any module that loads Zod.
import { zodIsJitless } from './zod-jitless.js';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { App } from './app.js';
import './styles.css';

if (!zodIsJitless()) console.warn('Zod is not jitless: it will probe for eval, which the page policy refuses');
const root = document.getElementById('root');
if (!root) throw new Error('The page has no #root element');
createRoot(root).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
