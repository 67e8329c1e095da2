// Builds the console into dist/console, served by the binary at /console/
// (see ../embed.go and server/console.go). `npm run dev:console` serves it
// with hot reload on :5174, sending /graphql (and its WebSocket) to a
// server on 127.0.0.1:8080.
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

export default defineConfig({
  root: here('.'),
  base: '/console/',
  esbuild: { jsx: 'automatic' },
  build: {
    outDir: here('../dist/console'),
    emptyOutDir: true,
    rollupOptions: {
      onwarn(warning, warn) {
        // react-router marks modules "use client", a directive for React
        // Server Components that means nothing in a bundle.
        if (warning.code === 'MODULE_LEVEL_DIRECTIVE') return;
        warn(warning);
      },
    },
  },
  server: {
    port: 5174,
    proxy: { '/graphql': { target: 'http://127.0.0.1:8080', ws: true } },
  },
});
