/**
 * The layers of lib/, lowest first (CONTRIBUTING.md, "Layers"): a module imports only from its own
 * layer and the layers below it. Type-only imports count (`tsPreCompilationDeps`), so a type cannot
 * smuggle a dependency upwards or close a circle. `npm test` runs this; a violation names its rule.
 */
const LAYERS = [
  'core',
  'protocol',
  'cluster',
  'observability',
  'identity',
  'lifecycle',
  'input',
  'tasks',
  'events',
  'server',
  'dispatch',
  'transport',
  'plugin'
]

/** `lib/<layer>/`, and lib/index.ts as part of the plugin layer. */
const folder = layer => layer === 'plugin' ? '^lib/(plugin/|index\\.ts$)' : `^lib/${layer}/`

const layerRules = LAYERS.slice(0, -1).map((layer, i) => ({
  name: `layer-${layer}`,
  comment: `lib/${layer}/ imports nothing from the layers above it: ${LAYERS.slice(i + 1).join(', ')}`,
  severity: 'error',
  from: { path: folder(layer) },
  to: { path: LAYERS.slice(i + 1).map(folder) }
}))

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'No import circle, type-only imports included',
      severity: 'error',
      from: {},
      to: { circular: true }
    },
    ...layerRules,
    {
      name: 'lib-in-a-layer',
      comment: 'Every module of lib/ is in a layer folder (or is lib/index.ts)',
      severity: 'error',
      from: { path: '^lib/', pathNot: [...LAYERS.map(folder)] },
      to: {}
    },
    {
      name: 'lib-stands-alone',
      comment: 'lib/ never imports the tests, the demo or the benchmarks',
      severity: 'error',
      from: { path: '^lib/' },
      to: { path: '^(test|example|benchmarks|types)/' }
    },
    {
      name: 'no-orphans',
      comment: 'A module of lib/ that nothing imports and that imports nothing is dead (the worker thread entry is loaded by URL)',
      severity: 'error',
      from: { orphan: true, path: '^lib/', pathNot: ['^lib/index\\.ts$', '^lib/server/worker-entry\\.ts$'] },
      to: {}
    },
    {
      name: 'no-dev-dependencies',
      comment: 'lib/ uses only what the published package declares (dependencies and peers)',
      severity: 'error',
      from: { path: '^lib/' },
      to: { dependencyTypes: ['npm-dev'], dependencyTypesNot: ['npm-peer'] }
    },
    {
      name: 'not-to-unresolvable',
      comment: 'Every import resolves',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true }
    }
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default', 'types'] },
    moduleSystems: ['es6', 'cjs']
  }
}
