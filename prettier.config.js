// Prettier, matched to the code as it was written by hand: no semicolons, single quotes, trailing
// commas wherever the code breaks a list over lines, parentheses around every arrow parameter, and
// long lines. printWidth 160 was measured on a copy of src/, test/ and bench/: a wider width changes
// fewer lines (120: 3146, 140: 2702, 160: 2383, 200: 2032 changed lines in src/) but much of what
// remains is one-line blocks (`if (x) { a; b }`) that prettier always expands, and past 160 the gain
// flattens while the few very long lines (2.5% of src/ is over 160) stay hard to read.
/** @type {import('prettier').Config} */
export default {
  semi: false,
  singleQuote: true,
  trailingComma: 'all',
  arrowParens: 'always',
  printWidth: 160,
  // YAML (docker-compose.yml, redocly.yaml) is written with double quotes.
  overrides: [{ files: ['*.yml', '*.yaml'], options: { singleQuote: false } }],
}
