/**
 * The package as users get it: `npm pack` (which runs prepack, a clean build), then the tarball's file
 * list, every reference inside it, and a throwaway project that installs it with fastify@^5 (and not
 * the optional peer ioredis), compiles a strict TypeScript consumer and runs an ESM and a CommonJS
 * script that each answer one tools/call.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { responseMessage, run, writeConsumerProject, type Run } from '../helpers/consumer-project.js'
import { danglingReferences, readTarball } from '../helpers/tarball.js'

// Pack, install and compile take tens of seconds (longer on a cold npm cache); .taprc's 60 s is too short.
t.setTimeout(300_000)

const root = fileURLToPath(new URL('../..', import.meta.url))
const rootManifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> }
const work = mkdtempSync(join(tmpdir(), 'fastify-mcp-cancellation-package-'))
t.teardown(() => { rmSync(work, { recursive: true, force: true }) })

const timings: Record<string, number> = {}
const tail = (text: string, lines = 40): string => text.trimEnd().split('\n').slice(-lines).join('\n')
const outputOf = (result: Run): Record<string, unknown> =>
  ({ code: result.code, signal: result.signal, stdout: tail(result.stdout), stderr: tail(result.stderr) })
const lastJsonLine = (stdout: string): Record<string, unknown> | undefined => {
  const line = stdout.trimEnd().split('\n').at(-1)
  try { return line === undefined ? undefined : JSON.parse(line) as Record<string, unknown> } catch { return undefined }
}

await t.test('the reference check finds what it should', async t => {
  const file = (text: string): Buffer => Buffer.from(text)
  const problems = danglingReferences(new Map([
    ['package.json', file(JSON.stringify({ name: 'p', main: './dist/main.js', exports: { '.': { types: './dist/index.d.ts', default: './dist/index.js' } }, dependencies: { dep: '1' } }))],
    ['README.md', file('[ok](https://example.com) [ok](#usage) [ok](LICENSE) [bad](benchmarks/README.md)\n```\n[not a link](in/code.md)\n```\n')],
    ['LICENSE', file('MIT')],
    ['dist/index.js', file([
      "import { a } from './a.js'",
      "import { b } from './missing.js'",
      "import dep from 'dep/sub'",
      "import dev from 'devonly'",
      "import fs from 'node:fs'",
      "// import { c } from './commented.js'",
      "const w = new URL(`./worker${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url)",
      "const gone = new URL(`./gone${'.js'}`, import.meta.url)",
      "const pkg = createRequire(import.meta.url)('../package.json')",
      'const req = createRequire(import.meta.url)',
      "req('../lib/index.ts')",
      "await import('./lazy.js')",
      '//# sourceMappingURL=index.js.map'
    ].join('\n'))],
    ['dist/index.d.ts', file("import type { A } from './a.js'\nimport type { X } from './x.js'\nexport type Y = import('./y.js').Y\ndeclare module 'fastify' {}\n")],
    ['dist/a.js', file('export const a = 1')],
    ['dist/a.d.ts', file('export declare const a = 1')],
    ['dist/worker.js', file('')]
  ]))
  t.same(problems.sort(), [
    'README.md: relative link benchmarks/README.md does not resolve inside the tarball (make it an absolute URL)',
    'dist/index.d.ts: fastify is neither a built-in nor a dependency or peer of the package',
    'dist/index.d.ts: types ./x.js is not in the tarball',
    'dist/index.d.ts: types ./y.js is not in the tarball',
    'dist/index.js: devonly is neither a built-in nor a dependency or peer of the package',
    'dist/index.js: has a sourceMappingURL comment',
    'dist/index.js: import ./lazy.js is not in the tarball',
    'dist/index.js: import ./missing.js is not in the tarball',
    'dist/index.js: require ../lib/index.ts is not in the tarball',
    "dist/index.js: url `./gone${'.js'}` is not in the tarball",
    'package.json: entry point ./dist/main.js is not in the tarball'
  ].sort())
})

// Inside a subtest: tap ends a root test that sits idle on other work.
const packed: { tarball?: string } = {}
await t.test('npm pack makes one tarball (prepack: a clean build)', async t => {
  const result = await run('npm', ['pack', '--pack-destination', work], root, 240_000)
  timings.pack = result.ms
  const made = readdirSync(work).filter(name => name.endsWith('.tgz'))
  if (result.code === 0 && made.length === 1 && made[0] !== undefined) {
    packed.tarball = join(work, made[0])
    t.pass(made[0])
  } else {
    t.fail('npm pack succeeds', { ...outputOf(result), made })
  }
})

const tarball = packed.tarball
if (tarball !== undefined) {
  const files = readTarball(readFileSync(tarball))
  const paths = [...files.keys()].sort()

  await t.test('the tarball holds what ships and nothing else', async t => {
    for (const path of ['package.json', 'README.md', 'LICENSE', 'dist/index.js', 'dist/index.d.ts']) {
      t.ok(files.has(path), `${path} is in it`)
    }
    t.same(paths.filter(path => path.endsWith('.map')), [], 'no source maps')
    t.same(paths.filter(path => /^(lib|test|benchmarks|example|types|\.ci)\//.test(path)), [],
      'nothing under lib/, test/, benchmarks/, example/, types/, .ci/')
    t.same(paths.filter(path => !['package.json', 'README.md', 'LICENSE'].includes(path) && !/^dist\/.+\.(js|d\.ts)$/.test(path)), [],
      'only package.json, README.md, LICENSE and dist/**/*.{js,d.ts}')
    t.same(paths.filter(path => path.endsWith('.js') && !files.has(path.replace(/\.js$/, '.d.ts'))), [],
      'every module has its declarations')
    const license = files.get('LICENSE')?.toString('utf8') ?? ''
    t.match(license, /^MIT License\n\nCopyright \(c\) 2026 fastify-mcp-cancellation contributors\n/, 'LICENSE is MIT, 2026, the contributors')
    const bytes = [...files.values()].reduce((sum, content) => sum + content.length, 0)
    t.comment(`${paths.length} files, ${Math.round(bytes / 1024)} kB unpacked, tarball ${Math.round(readFileSync(tarball).length / 1024)} kB`)
  })

  await t.test('nothing in the tarball refers to what is not in it', async t => {
    t.same(danglingReferences(files), [], 'relative imports, URLs, requires, source maps, entry points, README links')
  })

  await t.test('installed into a fresh project', async t => {
    const consumer = join(work, 'consumer')
    mkdirSync(consumer)
    writeConsumerProject(consumer, readFileSync(join(root, 'README.md'), 'utf8'))
    // @types/node: what every TypeScript user of Fastify has (its declarations need it); the repository's range, so the cache serves it.
    const installed = await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', tarball, 'fastify@^5',
      `@types/node@${rootManifest.devDependencies['@types/node'] ?? '*'}`], consumer, 240_000)
    timings.install = installed.ms
    if (installed.code !== 0) {
      t.fail('npm install of the tarball and fastify@^5 succeeds', outputOf(installed))
      return
    }
    t.ok(existsSync(join(consumer, 'node_modules', 'fastify-mcp-cancellation', 'dist', 'index.js')), 'the package is installed')
    t.ok(existsSync(join(consumer, 'node_modules', 'piscina')), 'piscina (a dependency) is installed')
    t.notOk(existsSync(join(consumer, 'node_modules', 'ioredis')), 'ioredis (an optional peer) is not installed')

    const tsc = join(root, 'node_modules', '.bin', 'tsc')
    const [compiled, esm, cjs] = await Promise.all([
      run(tsc, ['-p', consumer], consumer, 120_000),
      run(process.execPath, ['esm.js'], consumer, 60_000),
      run(process.execPath, ['cjs.cjs'], consumer, 60_000)
    ])
    timings.tsc = compiled.ms
    timings.esm = esm.ms
    timings.cjs = cjs.ms

    t.test('a strict TypeScript consumer, and the README\'s Getting started and Running in production, compile (NodeNext, skipLibCheck false)', async t => {
      const diagnostics = compiled.stdout.split('\n').filter(line => /error TS\d+/.test(line))
      t.same(diagnostics, [], 'no diagnostics')
      t.equal(compiled.code, 0, 'tsc exits 0', outputOf(compiled))
    })

    t.test('ESM: import, nothing lazy loaded, one tools/call', async t => {
      const out = lastJsonLine(esm.stdout)
      if (esm.code !== 0 || out === undefined) {
        t.fail('node esm.js runs (import of the package without ioredis installed)', outputOf(esm))
        return
      }
      t.equal(out.ioredisInstalled, false, 'ioredis cannot be resolved, and the import works')
      t.same(out.afterImport, { piscina: false, ioredis: false }, 'a plain import loads neither piscina nor ioredis')
      t.same(out.afterCall, { piscina: false, ioredis: false }, 'nor does a call without worker tools or redis')
      t.same(out.withoutIoredis, {
        code: 'FST_MCP_MISSING_DEPENDENCY',
        message: 'Option "redis" needs the ioredis package to connect to a URL (npm i ioredis)'
      }, 'a redis URL without ioredis installed is a coded register-time error')
      t.equal(out.typeofPlugin, 'function', 'the default export is the plugin function')
      t.equal(out.statusCode, 200, 'tools/call is answered 200')
      t.match(responseMessage(out.contentType as string | undefined, String(out.body)),
        { jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: 'hi' }] } }, 'echo answers hi')
      if (esm.stderr.trim() !== '') t.comment(`esm.js stderr: ${tail(esm.stderr, 10)}`)
    })

    t.test('CommonJS: require(esm), one tools/call', async t => {
      const out = lastJsonLine(cjs.stdout)
      if (cjs.code !== 0 || out === undefined) {
        t.fail('node cjs.cjs runs (require of the package)', outputOf(cjs))
        return
      }
      const names = out.exports as string[]
      t.ok(names.includes('default') && names.includes('mcpCancellation'), 'require returns the namespace, default and named exports', { names })
      t.equal(out.sameNamed, true, 'default and named are the same plugin')
      t.equal(out.statusCode, 200, 'tools/call is answered 200')
      t.match(responseMessage(out.contentType as string | undefined, String(out.body)),
        { jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: 'hi' }] } }, 'echo answers hi')
      if (cjs.stderr.trim() !== '') t.comment(`cjs.cjs stderr: ${tail(cjs.stderr, 10)}`)
    })
  })
}

t.comment(`timings (ms): ${Object.entries(timings).map(([step, ms]) => `${step} ${ms}`).join(', ')}`)
