import createError from '@fastify/error'

/** Register-time errors. Wire-level failures are JSON-RPC errors (see `protocol/jsonrpc.ts`), never these. */
export const InvalidOptionError = createError<[string, string]>(
  'FST_MCP_INVALID_OPTION', 'Invalid option "%s": %s', 500, TypeError)

export const InvalidDefinitionError = createError<[string, string, string]>(
  'FST_MCP_INVALID_DEFINITION', 'Invalid %s "%s": %s', 500, TypeError)

export const DuplicateDefinitionError = createError<[string, string]>(
  'FST_MCP_DUPLICATE_DEFINITION', '%s "%s" is already registered', 500)

export const MissingDependencyError = createError<[string, string]>(
  'FST_MCP_MISSING_DEPENDENCY', 'Option "%s" needs %s to be registered first', 500)
