/**
 * `WWW-Authenticate: Bearer …` challenges (RFC 6750 §3) that send an MCP client to sign in, or to ask
 * for more scopes. `resource_metadata` (RFC 9728 §5.1) tells the client where this resource's metadata
 * is; `scope` lists every scope the operation needs, in one challenge. A request that carried no
 * credentials gets no `error` parameter (RFC 6750 §3.1).
 */
export type ChallengeError = 'invalid_request' | 'invalid_token' | 'insufficient_scope'

export class BearerChallenges {
  readonly #resourceMetadata: string | undefined

  constructor (resourceMetadataUrl: string | undefined) {
    this.#resourceMetadata = resourceMetadataUrl
  }

  /** The challenge; scope values are checked to be NQCHAR (RFC 6749 §3.3) when configured, so they never need escaping. */
  challenge (error: ChallengeError | undefined, scopes: readonly string[]): string {
    const parameters: string[] = []
    if (error !== undefined) parameters.push(`error="${error}"`)
    if (scopes.length > 0) parameters.push(`scope="${scopes.join(' ')}"`)
    if (this.#resourceMetadata !== undefined) parameters.push(`resource_metadata="${this.#resourceMetadata}"`)
    return parameters.length === 0 ? 'Bearer' : `Bearer ${parameters.join(', ')}`
  }
}
