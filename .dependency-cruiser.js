// The layer rules of docs/architecture.md ("Layers") as a check: `npm run layers`, run by npm test.
// Imports point down (http → sessions → {sandbox, repl, store}, http → cluster → store, agent → sessions,
// http → mcp → sessions), never in a circle, and a room is entered through its face (its index.ts).
// Type-only imports count: an arrow is an arrow whether or not it survives compilation.

/** Imports from files matching `from` to files matching `to` fail the check. */
const forbid = (name, comment, from, to) => ({ name, comment, severity: 'error', from, to })

/** A folder is entered through its index.ts from outside it. */
const face = (folder) =>
  forbid(
    `${folder.replaceAll('/', '-')}-through-its-face`,
    `src/${folder}/ is entered through its index.ts`,
    { path: '^src/', pathNot: `^src/${folder}/` },
    { path: `^src/${folder}/`, pathNot: `^src/${folder}/index\\.ts$` },
  )

export default {
  forbidden: [
    forbid('no-circles', 'No import circles: each arrow points down, so none comes back', { path: '^src/' }, { circular: true }),
    forbid(
      'shared-modules-import-no-layer',
      'The modules at the top of src/ (config, errors, schemas, tenants, templates, metrics, ...) are used by every layer and import none; app.ts builds the layers, server.ts, openapi.ts and config-docs.ts run it',
      { path: '^src/[^/]+\\.ts$', pathNot: '^src/(app|server|openapi|config-docs)\\.ts$' },
      { path: '^src/[^/]+/' },
    ),
    forbid(
      'store-at-the-bottom',
      'The store is given its settings (app.ts reads the config): it imports no layer above it, nor the config',
      { path: '^src/store/' },
      { path: ['^src/(sessions|sandbox|repl|agent|mcp|http|cluster)/', '^src/config\\.ts$'] },
    ),
    forbid(
      'repl-at-the-bottom',
      'The REPL client knows frames and transports only',
      { path: '^src/repl/' },
      { path: '^src/(sessions|sandbox|store|agent|mcp|http|cluster)/' },
    ),
    forbid(
      'sandbox-below-sessions',
      'Sandboxes know the REPL transport only',
      { path: '^src/sandbox/' },
      { path: '^src/(sessions|store|agent|mcp|http|cluster)/' },
    ),
    forbid(
      'sessions-below-its-callers',
      'The sessions layer never imports the agent, the MCP tools, the HTTP layer or the cluster',
      { path: '^src/sessions/' },
      { path: '^src/(agent|mcp|http|cluster)/' },
    ),
    forbid(
      'rooms-below-the-lifecycle',
      "The sessions layer's rooms (runner/, supply/, processes/) import nothing of the lifecycle above them (ids.ts: the ids both make)",
      { path: '^src/sessions/(runner|supply|processes)/' },
      { path: '^src/sessions/[^/]+\\.ts$', pathNot: '^src/sessions/ids\\.ts$' },
    ),
    forbid(
      'cluster-beside-sessions',
      'The cluster reaches the sessions layer only through what app.ts hands it',
      { path: '^src/cluster/' },
      { path: '^src/(sessions|agent|mcp|http)/' },
    ),
    forbid(
      'agent-below-http',
      'The agent runs code through the sessions layer; the HTTP layer calls it',
      { path: '^src/agent/' },
      { path: '^src/(mcp|http|cluster)/' },
    ),
    forbid(
      'mcp-below-http',
      'The MCP tools run code through the sessions layer; the HTTP layer serves them',
      { path: '^src/mcp/' },
      { path: '^src/(agent|http|cluster)/' },
    ),
    forbid(
      'fastify-only-in-http',
      'Nothing outside src/http/ knows Fastify (but app.ts, which builds the Fastify instance)',
      { path: '^src/', pathNot: '^src/(http/|app\\.ts$)' },
      // (^|/): a node_modules that is a link resolves outside the repository.
      { path: '(^|/)node_modules/(fastify|@fastify)/' },
    ),
    face('sessions'),
    face('sessions/runner'),
    face('sessions/supply'),
    face('sessions/processes'),
    face('cluster'),
  ],
  options: {
    doNotFollow: { path: '^node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
}
