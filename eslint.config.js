// ESLint: neostandard, the Fastify organisation's style (https://github.com/neostandard/neostandard),
// with its TypeScript support, plus the type-aware promise rules of typescript-eslint: in a plugin
// built on cancellation a promise nobody awaits is a rejection nobody handles, and that ends the process.
import neostandard, { resolveIgnoresFromGitignore } from 'neostandard'
import eslintComments from '@eslint-community/eslint-plugin-eslint-comments/configs'

export default [
  ...neostandard({
    ts: true,
    // The package has no JSX.
    noJsx: true,
    // What git ignores is not source: dist/, coverage/, .tap/, node_modules, .ci/conformance/node_modules.
    ignores: resolveIgnoresFromGitignore(),
  }),
  {
    name: 'fastify-mcp-cancellation/promises',
    files: ['**/*.ts'],
    languageOptions: {
      // Each file is checked with the types of the tsconfig.json nearest to it (types/ has its own).
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // https://typescript-eslint.io/rules/no-floating-promises: `void` marks a promise left on purpose.
      // A tap subtest needs no await: its parent queues it and waits for it (PromiseWithSubtest in
      // node_modules/@tapjs/core/dist/esm/test-base.d.ts is what `t.test` returns).
      '@typescript-eslint/no-floating-promises': ['error', {
        allowForKnownSafePromises: [{ from: 'package', package: '@tapjs/core', name: 'PromiseWithSubtest' }],
      }],
      // https://typescript-eslint.io/rules/no-misused-promises: an async callback where a void one is expected.
      '@typescript-eslint/no-misused-promises': 'error',
      // https://typescript-eslint.io/rules/await-thenable
      '@typescript-eslint/await-thenable': 'error',
    },
  },
  // An eslint-disable names its rules and says why after `--` on the same line; one that disables
  // nothing is an error (https://eslint-community.github.io/eslint-plugin-eslint-comments).
  eslintComments.recommended,
  {
    name: 'fastify-mcp-cancellation/directives',
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: { '@eslint-community/eslint-comments/require-description': 'error' },
  },
  {
    name: 'fastify-mcp-cancellation/tests',
    files: ['test/**/*.ts'],
    rules: {
      // Tests assert that control characters never reach a response or a log, so their patterns
      // name those characters on purpose; in lib/ such a pattern stays an error.
      'no-control-regex': 'off',
      // The package check feeds source text containing `${…}` to the scanner it tests.
      'no-template-curly-in-string': 'off',
    },
  },
  {
    name: 'fastify-mcp-cancellation/void-statements',
    // neostandard forbids `void` everywhere; as a statement it is how no-floating-promises is told that
    // a promise is left on purpose (its rejection is handled where it is made), so it stays allowed there.
    rules: { 'no-void': ['error', { allowAsStatement: true }] },
  },
]
