import type { FastifyInstance, FastifyReply } from 'fastify'
import { RouteConflictError } from '../core/errors.js'
import { RESOURCE_METADATA_SEGMENT, resourceMetadata, resourceMetadataPath, type ResourceMetadataSettings } from '../identity/resource-metadata.js'

/**
 * A browser-based client (the Inspector, a web app) reads the metadata cross-origin, and the SDK sends
 * `MCP-Protocol-Version` with it: a public document, readable from any origin, cached briefly (what
 * the tools declare may change).
 */
const HEADERS = {
  'access-control-allow-origin': '*',
  'access-control-allow-methods': 'GET, OPTIONS',
  'access-control-allow-headers': 'authorization, content-type, mcp-protocol-version',
  'access-control-max-age': '86400',
  'cache-control': 'public, max-age=300'
}

/**
 * Serves the Protected Resource Metadata (RFC 9728) at the path-based well-known URL of the resource
 * (`/.well-known/oauth-protected-resource/mcp` for `…/mcp`, §3.1) and at the root one, which clients
 * probe too (the root only if no other instance of the plugin serves it already). Under a register
 * prefix both would land under the prefix, where no client probes the root one: only the path-based
 * one is served there, where the challenges say (`resourceMetadataUrl`).
 */
export function registerResourceMetadata (fastify: FastifyInstance, metadata: ResourceMetadataSettings, declaredScopes: () => Iterable<string>): void {
  const paths = [resourceMetadataPath(metadata.resource)]
  // Another instance with the same resource (or the application) has it: name the option, not Fastify's FST_ERR_DUPLICATED_ROUTE.
  const taken = fastify.prefix + paths[0]!
  if (fastify.hasRoute({ method: 'GET', url: taken })) throw new RouteConflictError('auth.oauth.resource', `GET ${taken}`, 'auth.oauth.resource')
  const root = fastify.prefix === '' && paths[0] !== RESOURCE_METADATA_SEGMENT && !fastify.hasRoute({ method: 'GET', url: RESOURCE_METADATA_SEGMENT })
  if (root) paths.push(RESOURCE_METADATA_SEGMENT)
  const document = async (_request: unknown, reply: FastifyReply): Promise<FastifyReply> =>
    await reply.headers(HEADERS).send(resourceMetadata(metadata, declaredScopes()))
  for (const url of paths) {
    fastify.get(url, document)
    fastify.options(url, async (_request, reply) => await reply.code(204).headers(HEADERS).send())
  }
}
