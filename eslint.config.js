// ESLint (flat config): typescript-eslint's type-checked recommended rules over src/, test/ and bench/.
// Run: npm run lint   (or: npx eslint test bench)
import js from '@eslint/js'
import tseslint from 'typescript-eslint'

export default tseslint.config(
  // Build output, local state, generated test files and the Python image are not ours to lint.
  // .tmp-bench/ and bench/results/: what npm run bench builds and writes.
  {
    ignores: [
      'dist/',
      'node_modules/',
      '.replcast/',
      '.tap/',
      'test/.generated/',
      'sandbox-image/',
      'clients/typescript/dist/',
      '.tmp-bench/',
      'bench/results/',
    ],
  },
  js.configs.recommended,
  tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        // tsconfig.json is the build's and covers src/ only; tsconfig.eslint.json extends it with test/ and bench/.
        // (projectService would pick tsconfig.json for test files too and fall back to a capped default project.)
        project: './tsconfig.eslint.json',
        tsconfigRootDir: import.meta.dirname,
      },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // Kept on, but with the codebase's convention: a leading underscore marks a value left unused on purpose
      // (e.g. `const { seq: _seq, ...rest } = event` to drop a field), and rest siblings drop fields too.
      '@typescript-eslint/no-unused-vars': [
        'error',
        {
          argsIgnorePattern: '^_',
          varsIgnorePattern: '^_',
          caughtErrorsIgnorePattern: '^_',
          destructuredArrayIgnorePattern: '^_',
          ignoreRestSiblings: true,
        },
      ],
      // Off: Fastify plugins and handlers and tap subtests are async by contract (the framework waits on the
      // returned promise, and a tap subtest whose callback returns no promise must call t.end()), so `async`
      // without an `await` is intended here, not a mistake. Unhandled promises are still caught by
      // no-floating-promises, no-misused-promises and await-thenable, which stay on.
      '@typescript-eslint/require-await': 'off',
    },
  },
  {
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      // tap's t.test() returns a PromiseWithSubtest that tap itself sequences and reports; calling it without
      // awaiting is how tap is meant to be used. Every other floating promise in tests is still an error.
      '@typescript-eslint/no-floating-promises': [
        'error',
        { allowForKnownSafePromises: [{ from: 'package', name: 'PromiseWithSubtest', package: '@tapjs/core' }] },
      ],
      // Off in tests and benchmarks only (they stay on for src/): these read untyped JSON from HTTP responses,
      // SSE frames, Redis and Docker inspect output, and the assertions themselves check the shape at run time;
      // typing every response body would add casts, not safety.
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
    },
  },
  // Config files in plain JS are outside every tsconfig: lint them without type information.
  { files: ['**/*.js'], extends: [tseslint.configs.disableTypeChecked] },
)
