// POST /mcp: the Model Context Protocol over Streamable HTTP, authenticated like /v1/ (the app's
// onRequest hook). Stateless: each request gets its own server and transport, so no MCP session
// lives in one instance's memory; a replcast session id is what carries state between calls.
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import type { FastifyInstance, FastifyReply } from 'fastify'
import type { Logger } from 'pino'
import { createMcpServer, type McpDeps } from '../../mcp/server.js'

/** Also named in http/auth.ts isAuthenticatedRoute, which puts it behind the API keys. */
const MCP_PATH = '/mcp'

export async function mcpRoutes(app: FastifyInstance, deps: McpDeps): Promise<void> {
  const open = new Set<StreamableHTTPServerTransport>()

  // Not in openapi.yaml: JSON-RPC has its own specification (modelcontextprotocol.io); the README shows a client set-up.
  // mcpHolder: a tools/call in a session is answered by the instance holding it (http/mcp-routing.ts).
  app.post(MCP_PATH, { schema: { hide: true }, config: { mcpHolder: true } }, async (req, reply) => {
    // The app's logger is pino (app.ts hands it to Fastify), so the request's child logger is one too.
    const server = createMcpServer(deps, req.tenant, req.log as unknown as Logger, req.headers.authorization)
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined })
    open.add(transport)
    reply.hijack()
    // The client leaving ends the request; closing aborts the tool call's signal (run_python then interrupts its code).
    reply.raw.on('close', () => {
      open.delete(transport)
      void transport.close()
      void server.close()
    })
    await server.connect(transport)
    await transport.handleRequest(req.raw, reply.raw, req.body)
  })

  // A stateless server has no stream for server-initiated messages (GET) and no session to end (DELETE).
  const notAllowed = async (_req: unknown, reply: FastifyReply) => {
    reply
      .code(405)
      .header('allow', 'POST')
      .send({ jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed: this MCP server is stateless; send requests with POST' }, id: null })
  }
  app.get(MCP_PATH, { schema: { hide: true } }, notAllowed)
  app.delete(MCP_PATH, { schema: { hide: true } }, notAllowed)

  app.addHook('preClose', async () => {
    await Promise.all([...open].map((t) => t.close()))
  })
}
