/**
 * The part of oidc-provider (https://github.com/panva/node-oidc-provider, no bundled types) that
 * test/helpers/authorization-server.ts uses. The configuration is its documented object
 * (node_modules/oidc-provider/lib/helpers/defaults.js), left untyped here.
 */
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http'

  export default class Provider {
    constructor (issuer: string, configuration: Record<string, unknown>)
    readonly issuer: string
    /** A request listener for node:http (Koa's `callback()`). */
    callback (): (req: IncomingMessage, res: ServerResponse) => Promise<void>
    /** Emitted for a 500 with the error the provider hid from the client. */
    on (event: 'server_error', listener: (ctx: unknown, error: Error) => void): this
  }

  /** The OAuth errors a configuration function may throw; the provider answers them as such. */
  export const errors: {
    /** `invalid_target` (RFC 8707 §2): a resource the server does not issue tokens for. */
    InvalidTarget: new (description?: string) => Error
  }
}
