/** The `Implementation` of the MCP schema: who a server (or client) is, as `serverInfo` carries it. */
export interface Implementation {
  name: string
  version: string
  title?: string | undefined
  [key: string]: unknown
}
