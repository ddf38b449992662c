/** Protocol revisions this transport can speak, and which era each belongs to. */

export const MODERN_VERSIONS = ['2026-07-28'] as const
export const LEGACY_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26'] as const
export const KNOWN_VERSIONS: readonly string[] = [...MODERN_VERSIONS, ...LEGACY_VERSIONS]

export type ProtocolVersion = typeof MODERN_VERSIONS[number] | typeof LEGACY_VERSIONS[number]
export type Era = 'legacy' | 'modern'

/** The revision a legacy request without `MCP-Protocol-Version` is assumed to speak (2025-06-18 transports). */
export const HEADERLESS_LEGACY_VERSION = '2025-03-26'

/**
 * The revisions whose response streams resume: 2025-11-25 lets a server close a stream before its
 * response and the client resume it (SEP-1699 SSE polling); 2025-06-18 and 2025-03-26 say a server
 * SHOULD NOT close it early, and their clients send no priming-aware resume.
 */
const RESUMABLE_VERSIONS: readonly string[] = ['2025-11-25']

export function resumesStreams (version: string): boolean {
  return RESUMABLE_VERSIONS.includes(version)
}

export function eraOf (version: string): Era {
  return (MODERN_VERSIONS as readonly string[]).includes(version) ? 'modern' : 'legacy'
}

/** The versions a server configured with `enabled` supports, split by era, newest first. */
export class SupportedVersions {
  readonly all: readonly string[]
  readonly legacy: readonly string[]

  constructor (enabled: readonly string[]) {
    this.all = KNOWN_VERSIONS.filter(v => enabled.includes(v))
    this.legacy = this.all.filter(v => eraOf(v) === 'legacy')
  }

  has (version: unknown): version is ProtocolVersion {
    return typeof version === 'string' && this.all.includes(version)
  }

  hasLegacy (version: unknown): version is ProtocolVersion {
    return typeof version === 'string' && this.legacy.includes(version)
  }
}
