// Builds the GraphiQL page into dist/graphiql, served by the binary at
// /graphiql (see ../embed.go). `npm run dev:graphiql` serves it with hot
// reload on :5173, sending /graphql to a server on 127.0.0.1:8080.
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

export default defineConfig({
  root: here('.'),
  base: '/graphiql/',
  esbuild: { jsx: 'automatic' },
  worker: { format: 'es' },
  build: {
    outDir: here('../dist/graphiql'),
    emptyOutDir: true,
    // Monaco, the editor GraphiQL 5 is built on, is one large chunk.
    chunkSizeWarningLimit: 5000,
    rollupOptions: {
      onwarn(warning, warn) {
        // GraphiQL's packages mark modules "use client" and "use no memo",
        // directives for React Server Components and the React Compiler
        // that mean nothing in a bundle.
        if (warning.code === 'MODULE_LEVEL_DIRECTIVE') return;
        warn(warning);
      },
    },
  },
  // The dev server's dependency pre-bundling cannot follow the ?worker
  // imports of GraphiQL's worker set-up: it is served as it is.
  optimizeDeps: { exclude: ['graphiql/setup-workers/vite', '@graphiql/react/setup-workers/vite'] },
  server: {
    fs: { allow: [here('.'), here('../node_modules'), here('../../examples')] },
    proxy: { '/graphql': { target: 'http://127.0.0.1:8080', ws: true } },
  },
});
