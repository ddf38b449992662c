import type { FastifyInstance } from 'fastify'
import { MissingDependencyError } from '../core/errors.js'
import { AccessTokenVerifier } from '../identity/access-tokens.js'
import { VerifiedTokens } from '../identity/verified-tokens.js'
import { Authenticator } from '../identity/authenticator.js'
import { BearerChallenges } from '../identity/bearer-challenge.js'
import { exactScope } from '../identity/oauth-scopes.js'
import { resourceMetadataUrl } from '../identity/resource-metadata.js'
import { bearerCredentials, customCredentials, jwtCredentials, type CredentialsSource } from '../identity/principal.js'
import type { RequestObserver } from '../observability/observer.js'
import type { Tracing } from '../observability/tracing.js'
import type { AuthSettings } from './options.js'

/** The authenticator the `auth` option asks for, or none without it. */
export function createAuthenticator (fastify: FastifyInstance, auth: AuthSettings | undefined, observer: RequestObserver, tracing: Tracing | undefined): Authenticator | undefined {
  if (auth === undefined) return undefined
  const { oauth } = auth
  return new Authenticator({
    credentials: credentialsOf(fastify, auth),
    required: auth.required,
    challenges: new BearerChallenges(oauth === undefined ? undefined : resourceMetadataUrl(oauth.metadata.resource, fastify.prefix)),
    requiredScopes: oauth?.requiredScopes ?? [],
    satisfies: oauth?.satisfies ?? exactScope,
    retryAfterSeconds: oauth?.retryAfterSeconds ?? 30,
    observer,
    tracing
  })
}

function credentialsOf (fastify: FastifyInstance, { credentials }: AuthSettings): CredentialsSource {
  switch (credentials.kind) {
    case 'custom':
      return customCredentials(credentials.principal)
    case 'oauth': {
      const verifier = new AccessTokenVerifier(credentials.tokens)
      // A verify hook of the application's own may check revocation per request: its answers are not kept.
      const tokens = credentials.tokens.verify === undefined ? new VerifiedTokens(verifier, credentials.cache) : verifier
      return bearerCredentials(tokens, credentials.maxTokenBytes)
    }
    case 'jwt':
      if (!fastify.hasRequestDecorator(credentials.verifyMethod)) throw new MissingDependencyError('auth.jwt', '@fastify/jwt to be registered first')
      return jwtCredentials(credentials.verifyMethod, credentials.claim)
  }
}
