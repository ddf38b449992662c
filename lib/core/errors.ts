import createError from '@fastify/error'

/**
 * Register-time errors, thrown while the plugin is registered or the application becomes ready.
 * Wire-level failures are JSON-RPC errors (see `protocol/jsonrpc.ts`), never these.
 */
export const InvalidOptionError = createError<[string, string]>(
  'FST_MCP_INVALID_OPTION', 'Invalid option "%s": %s', 500, TypeError)

export const InvalidDefinitionError = createError<[string, string, string]>(
  'FST_MCP_INVALID_DEFINITION', 'Invalid %s "%s": %s', 500, TypeError)

export const DuplicateDefinitionError = createError<[string, string]>(
  'FST_MCP_DUPLICATE_DEFINITION', '%s "%s" is already registered', 500)

/** An option needs a package the application must install, or a plugin it must register first. */
export const MissingDependencyError = createError<[string, string]>(
  'FST_MCP_MISSING_DEPENDENCY', 'Option "%s" needs %s', 500)

export const AlreadyRegisteredError = createError(
  'FST_MCP_ALREADY_REGISTERED',
  'fastify-mcp-cancellation is already registered in this context or one of its parents: register each instance in an encapsulated context of its own, with its own "path" and "metrics.path"',
  500)

/** Another route (another instance's, or the application's) already answers where this instance would. */
export const RouteConflictError = createError<[string, string, string]>(
  'FST_MCP_ROUTE_CONFLICT', 'Option "%s": %s is already routed; give this instance another %s', 500)
