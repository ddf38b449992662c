/**
 * Reads an `npm pack` tarball and finds what in it points outside it: relative imports, exports,
 * requires, `new URL(…, import.meta.url)` and `createRequire(…)(…)` references, triple-slash references,
 * source-map comments, package.json entry points and README links. Used by test/e2e/package.test.ts.
 */
import { builtinModules } from 'node:module'
import { posix } from 'node:path'
import { gunzipSync } from 'node:zlib'
import ts from 'typescript'

/** Every regular file of a gzipped tarball, by path inside the package (npm's leading `package/` removed). */
export function readTarball (gzipped: Buffer): Map<string, Buffer> {
  const tar = gunzipSync(gzipped)
  const files = new Map<string, Buffer>()
  const text = (start: number, length: number): string => {
    const field = tar.subarray(start, start + length)
    const end = field.indexOf(0)
    return field.subarray(0, end === -1 ? length : end).toString('utf8')
  }
  let paxPath: string | undefined
  for (let offset = 0; offset + 512 <= tar.length;) {
    if (tar.subarray(offset, offset + 512).every(byte => byte === 0)) break
    const size = Number.parseInt(text(offset + 124, 12).trim() || '0', 8)
    const type = text(offset + 156, 1)
    const prefix = text(offset + 345, 155)
    const name = prefix === '' ? text(offset, 100) : `${prefix}/${text(offset, 100)}`
    const body = tar.subarray(offset + 512, offset + 512 + size)
    offset += 512 + Math.ceil(size / 512) * 512
    if (type === 'x') { // pax extended header for the next entry: "<len> key=value\n" records
      for (const record of body.toString('utf8').split('\n')) {
        const match = /^\d+ path=(.*)$/.exec(record)
        if (match !== null) paxPath = match[1]
      }
      continue
    }
    if (type === 'g') continue
    const path = (paxPath ?? name).replace(/^package\//, '')
    paxPath = undefined
    if (type === '0' || type === '') files.set(path, Buffer.from(body))
  }
  return files
}

interface Reference {
  /** The file it was found in. */
  from: string
  /** What it names, as written. */
  specifier: string
  /** How it is resolved: `import` (ESM, exact file), `require` (CommonJS extensions), `url` (a file URL, maybe a pattern), `types` (a .d.ts import). */
  kind: 'import' | 'require' | 'url' | 'types'
  /** For a template literal: the pieces between its substitutions. */
  pattern?: string[]
}

const isRequireLike = (node: ts.Node, requires: Set<string>): boolean =>
  (ts.isIdentifier(node) && (node.text === 'require' || requires.has(node.text))) ||
  // createRequire(import.meta.url)('../package.json')
  (ts.isCallExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'createRequire')

const isImportMetaUrl = (node: ts.Node | undefined): boolean =>
  node !== undefined && ts.isPropertyAccessExpression(node) && node.name.text === 'url' &&
  ts.isMetaProperty(node.expression) && node.expression.keywordToken === ts.SyntaxKind.ImportKeyword

/** The module and file references of one .js or .d.ts file, read from its syntax tree (comments and strings ignored). */
export function referencesOf (path: string, source: string): { references: Reference[], bare: Set<string> } {
  const declaration = path.endsWith('.d.ts')
  const file = ts.createSourceFile(path, source, ts.ScriptTarget.Latest, true, declaration ? ts.ScriptKind.TS : ts.ScriptKind.JS)
  const references: Reference[] = []
  const bare = new Set<string>()
  const requires = new Set<string>() // names bound to createRequire(...)
  const add = (specifier: string, kind: Reference['kind']): void => {
    if (specifier.startsWith('.') || specifier.startsWith('/')) references.push({ from: path, specifier, kind })
    else bare.add(specifier)
  }
  for (const reference of file.referencedFiles) references.push({ from: path, specifier: reference.fileName, kind: 'types' })
  for (const reference of file.typeReferenceDirectives) bare.add(reference.fileName)

  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier !== undefined &&
      ts.isStringLiteral(node.moduleSpecifier)) {
      add(node.moduleSpecifier.text, declaration ? 'types' : 'import')
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference) &&
      ts.isStringLiteral(node.moduleReference.expression)) {
      add(node.moduleReference.expression.text, declaration ? 'types' : 'require')
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      add(node.argument.literal.text, 'types')
    } else if (ts.isModuleDeclaration(node) && ts.isStringLiteral(node.name)) {
      add(node.name.text, 'types') // declare module 'fastify' { … }: an augmentation of a package
    } else if (ts.isVariableDeclaration(node) && ts.isIdentifier(node.name) && node.initializer !== undefined &&
      ts.isCallExpression(node.initializer) && ts.isIdentifier(node.initializer.expression) &&
      node.initializer.expression.text === 'createRequire') {
      requires.add(node.name.text)
    } else if (ts.isCallExpression(node)) {
      const [first] = node.arguments
      if (first !== undefined && ts.isStringLiteralLike(first)) {
        const callee = node.expression
        if (callee.kind === ts.SyntaxKind.ImportKeyword) add(first.text, declaration ? 'types' : 'import')
        else if (isRequireLike(callee, requires)) add(first.text, 'require')
        else if (ts.isPropertyAccessExpression(callee) && callee.name.text === 'resolve') {
          if (isRequireLike(callee.expression, requires)) add(first.text, 'require')
          else if (ts.isMetaProperty(callee.expression)) add(first.text, 'import') // import.meta.resolve
        }
      }
    } else if (ts.isNewExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'URL' &&
      isImportMetaUrl(node.arguments?.[1])) {
      const first = node.arguments?.[0]
      if (first !== undefined && ts.isStringLiteralLike(first)) {
        references.push({ from: path, specifier: first.text, kind: 'url' })
      } else if (first !== undefined && ts.isTemplateExpression(first)) {
        const pattern = [first.head.text, ...first.templateSpans.map(span => span.literal.text)]
        references.push({ from: path, specifier: first.getText(file), kind: 'url', pattern })
      } else {
        references.push({ from: path, specifier: first === undefined ? '(nothing)' : first.getText(file), kind: 'url', pattern: [] })
      }
    }
    ts.forEachChild(node, visit)
  }
  visit(file)
  return { references, bare }
}

const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

/** Whether `reference` names a file (or, for a URL ending in `/`, a directory) of `files`. */
function resolves (reference: Reference, files: ReadonlySet<string>): boolean {
  const base = posix.dirname(reference.from)
  const inside = (target: string): string | undefined => {
    const normal = posix.normalize(target)
    return normal.startsWith('../') || normal === '..' || posix.isAbsolute(normal) ? undefined : normal
  }
  const runtime = [...files].filter(file => !file.endsWith('.d.ts'))
  if (reference.kind === 'url' && reference.pattern !== undefined) {
    if (reference.pattern.length === 0) return false // not a literal: cannot be checked, so it is reported
    // A template literal: each substitution may be any file name (no `/`); some shipped runtime file must match.
    const matcher = new RegExp(`^${reference.pattern.map(escapeRegExp).join('[^/]*')}$`)
    return runtime.some(file => {
      const relative = posix.relative(base, file)
      return matcher.test(relative) || matcher.test(`./${relative}`)
    })
  }
  if (reference.specifier.startsWith('/')) return false // an absolute path is the building machine's
  const target = inside(posix.join(base, reference.specifier))
  if (target === undefined) return false
  switch (reference.kind) {
    case 'import':
      return files.has(target)
    case 'url':
      if (files.has(target)) return true
      if (!reference.specifier.endsWith('/') && !reference.specifier.endsWith('.')) return false
      // new URL('./', import.meta.url): a directory, there when some runtime file is under it
      return runtime.some(file => target === '.' || target === './' || file.startsWith(`${target.replace(/\/$/, '')}/`))
    case 'require':
      return [target, `${target}.js`, `${target}.json`, `${target}.cjs`, `${target}/index.js`].some(file => files.has(file))
    case 'types': {
      const stem = target.replace(/\.(m|c)?js$/, '')
      const declarations = target.endsWith('.mjs')
        ? [`${stem}.d.mts`]
        : target.endsWith('.cjs') ? [`${stem}.d.cts`] : [`${stem}.d.ts`]
      return target.endsWith('.json') ? files.has(target) : declarations.some(file => files.has(file))
    }
  }
}

export interface PackageManifest {
  name: string
  main?: string
  types?: string
  exports?: unknown
  dependencies?: Record<string, string>
  peerDependencies?: Record<string, string>
  optionalDependencies?: Record<string, string>
}

const packageOf = (specifier: string): string => {
  const parts = specifier.split('/')
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0] ?? specifier
}

/** Every string target in an `exports` value (conditions and subpaths, nested). */
const exportTargets = (value: unknown): string[] =>
  typeof value === 'string'
    ? [value]
    : Array.isArray(value)
      ? value.flatMap(exportTargets)
      : typeof value === 'object' && value !== null ? Object.values(value).flatMap(exportTargets) : []

/** Links of a Markdown document outside code: inline `[x](target)`, reference definitions, HTML href/src. */
export function markdownLinks (markdown: string): string[] {
  const prose = markdown
    .replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '')
    .replace(/`[^`\n]*`/g, '')
  const links: string[] = []
  for (const match of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+["'(][^)]*)?\)/g)) links.push(match[1] ?? '')
  for (const match of prose.matchAll(/^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/gm)) links.push(match[1] ?? '')
  for (const match of prose.matchAll(/\b(?:href|src)\s*=\s*["']([^"']+)["']/gi)) links.push(match[1] ?? '')
  return links
}

/**
 * What in the tarball names something not in it, one line each: relative references of the .js and
 * .d.ts files, `sourceMappingURL` comments, bare specifiers that are neither Node built-ins nor the
 * package itself nor its dependencies or peers, package.json entry points, and README links that are
 * relative and do not name a shipped file.
 */
export function danglingReferences (files: ReadonlyMap<string, Buffer>): string[] {
  const problems: string[] = []
  const paths = new Set(files.keys())
  const manifestText = files.get('package.json')
  if (manifestText === undefined) return ['package.json is missing']
  const manifest = JSON.parse(manifestText.toString('utf8')) as PackageManifest
  const declared = new Set([
    manifest.name,
    ...Object.keys(manifest.dependencies ?? {}),
    ...Object.keys(manifest.peerDependencies ?? {}),
    ...Object.keys(manifest.optionalDependencies ?? {})
  ])
  const builtins = new Set(builtinModules)

  for (const [path, content] of files) {
    if (!path.endsWith('.js') && !path.endsWith('.d.ts') && !path.endsWith('.mjs') && !path.endsWith('.cjs')) continue
    const source = content.toString('utf8')
    if (/[#@]\s*sourceMappingURL=/.test(source)) problems.push(`${path}: has a sourceMappingURL comment`)
    const { references, bare } = referencesOf(path, source)
    for (const reference of references) {
      if (!resolves(reference, paths)) problems.push(`${path}: ${reference.kind} ${reference.specifier} is not in the tarball`)
    }
    for (const specifier of bare) {
      if (specifier.startsWith('node:') || builtins.has(specifier)) continue
      // `/// <reference types="node" />`: @types/node, which every TypeScript user of Node (and of Fastify) has.
      if (specifier === 'node' && path.endsWith('.d.ts')) continue
      if (!declared.has(packageOf(specifier))) {
        problems.push(`${path}: ${specifier} is neither a built-in nor a dependency or peer of the package`)
      }
    }
  }

  const entries = [manifest.main, manifest.types, ...exportTargets(manifest.exports)]
  for (const entry of entries) {
    if (entry !== undefined && !paths.has(posix.normalize(entry))) problems.push(`package.json: entry point ${entry} is not in the tarball`)
  }

  const readme = files.get('README.md')
  if (readme !== undefined) {
    for (const link of markdownLinks(readme.toString('utf8'))) {
      if (/^[a-z][a-z\d+.-]*:/i.test(link) || link.startsWith('//') || link.startsWith('#')) continue
      let target: string
      try { target = posix.normalize(decodeURI(link.replace(/[?#].*$/, ''))) } catch { target = link }
      const found = paths.has(target) || [...paths].some(file => file.startsWith(`${target.replace(/\/$/, '')}/`))
      if (!found) problems.push(`README.md: relative link ${link} does not resolve inside the tarball (make it an absolute URL)`)
    }
  }
  return [...new Set(problems)]
}
