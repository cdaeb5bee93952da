#!/usr/bin/env node
// `npx replcast` in a clone of the repository (the root package.json's bin): runs the CLI from its
// TypeScript source with Node's type stripping, so there is nothing to build first.
/* global process, console */
const [major, minor] = process.versions.node.split('.').map(Number)
if (major < 22 || (major === 22 && minor < 18)) {
  console.error(`replcast: the CLI runs from source on Node >= 22.18 (this is ${process.version}); \`source scripts/setup.sh node\` puts one on PATH`)
  process.exit(2)
}
await import('../src/cli/main.ts')
