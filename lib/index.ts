import { createRequire } from 'node:module'
import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { resolveSettings, type Implementation, type McpCancellationOptions } from './options.js'
import { Dispatcher } from './protocol/dispatcher.js'
import { SupportedVersions } from './protocol/versions.js'
import { McpServer, type McpServerApi } from './server/mcp-server.js'
import { registerEndpoint } from './transport/endpoint.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Register MCP tools, resources, resource templates, prompts and completions. */
    mcp: McpServerApi
  }
}

const packageJson = createRequire(import.meta.url)('../package.json') as Implementation

const plugin: FastifyPluginAsync<McpCancellationOptions> = async (fastify, options) => {
  const settings = resolveSettings(options, { name: packageJson.name, version: packageJson.version })
  const versions = new SupportedVersions(settings.protocolVersions)
  const server = new McpServer({
    serverInfo: settings.serverInfo,
    instructions: settings.instructions,
    versions,
    listTtlMs: settings.listTtlMs
  })
  fastify.decorate('mcp', server.api)
  registerEndpoint(fastify, settings, new Dispatcher(server, versions), versions)
}

export const mcpCancellation = fp(plugin, { fastify: '5.x', name: 'fastify-mcp-cancellation' })
export default mcpCancellation

export { InvalidOptionError, InvalidDefinitionError, DuplicateDefinitionError } from './errors.js'
export { ToolError, type ToolDefinition, type ToolHandler, type CallToolResult } from './server/tools.js'
export type { ResourceDefinition, ResourceTemplateDefinition, ReadResourceResult } from './server/resources.js'
export type { PromptDefinition, PromptArgument, GetPromptResult } from './server/prompts.js'
export type { CompletionDefinition, CompletionReference, CompletionValues } from './server/completions.js'
export type { HandlerContext, HandlerContext as ToolContext } from './server/context.js'
export type { McpServerApi } from './server/mcp-server.js'
export type { McpCancellationOptions, Implementation, ResponseMode, OriginMatcher } from './options.js'
export { RequestCancelledError, type CancellationSource } from './cancellation/exchange.js'
export type { LoggingLevel } from './protocol/era.js'
export type { RequestId } from './protocol/jsonrpc.js'
