// The MCP SDK's own client connected to a server's /mcp, and the text of a tool result.
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'

/** Connects with `key` as the Bearer key (null: no Authorization header). */
export async function connectMcp(url: string, key: string | null): Promise<Client> {
  const client = new Client({ name: 'replcast-test', version: '1.0.0' })
  const headers: Record<string, string> = key === null ? {} : { authorization: `Bearer ${key}` }
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers } }))
  return client
}

/** A tool call's result (the SDK types it loosely). */
export const callTool = async (client: Client, name: string, args: Record<string, unknown> = {}): Promise<CallToolResult> =>
  (await client.callTool({ name, arguments: args })) as CallToolResult

/** The text parts of a tool result, joined. */
export const textOf = (r: CallToolResult): string =>
  r.content
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('')
