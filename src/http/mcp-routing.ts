// POST /mcp names its session in the JSON-RPC body, not in the path: before Fastify parses it, the
// body is read (within the route's limit), and a tools/call that needs a session's sandbox is passed
// whole to the instance holding that session (src/cluster/), as holder-routing.ts does for REST routes.
import { Readable } from 'node:stream'
import type { FastifyInstance } from 'fastify'
import type { Cluster } from '../cluster/index.js'
import { AppError } from '../errors.js'
import { sessionOfCalls } from '../mcp/holder-calls.js'

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route's JSON-RPC body may call tools in a session: the instance holding it answers (POST /mcp). */
    mcpHolder?: boolean
  }
}

/** A session id as a tool call may carry it; anything else is left to the tool's validation. */
const SESSION_ID = /^[A-Za-z0-9_-]{1,64}$/

export function installMcpRouting(app: FastifyInstance, cluster: Pick<Cluster, 'route' | 'isInternal'>): void {
  app.addHook('preParsing', async (req, reply, payload) => {
    if (!req.routeOptions.config.mcpHolder) return payload
    // Only a plain JSON body can be looked into; anything else gets the route's own answer.
    if (!/^application\/json\b/i.test(req.headers['content-type'] ?? '') || req.headers['content-encoding'] !== undefined) return payload
    const limit = req.routeOptions.bodyLimit ?? app.initialConfig.bodyLimit ?? 1024 * 1024
    // Fastify's parser refuses a body declared too large (413) before reading it.
    if (Number(req.headers['content-length']) > limit) return payload
    const body = await readBody(payload, limit)
    const sid = callsSession(body)
    if (sid) {
      const internal = cluster.isInternal(req.raw)
      try {
        const onAnswer = () => {
          reply.hijack()
        }
        if ((await cluster.route({ sid, req: req.raw, res: reply.raw, internal, body, onAnswer })) === 'forwarded') {
          req.log.debug({ sessionId: sid }, 'mcp: answered by the session holder')
          return payload
        }
      } catch (err) {
        // Still moving after the routing's wait: answered here, where the call gets a session_moving
        // result the model can act on. A hop from another instance is refused (it asks the holder again).
        if (internal || !(err instanceof AppError && err.code === 'session_moving')) throw err
      }
    }
    // Fastify's parser reads the same bytes (preParsing may hand it a new stream).
    return Readable.from([body], { objectMode: false })
  })
}

function callsSession(body: Buffer): string | null {
  let message: unknown
  try {
    message = JSON.parse(body.toString('utf8'))
  } catch {
    return null // the route answers the parse error
  }
  const sid = sessionOfCalls(message)
  return sid && SESSION_ID.test(sid) ? sid : null
}

/** The whole body; past `limit` bytes, 413 and the connection closes (as Fastify's own parser does). */
function readBody(stream: NodeJS.ReadableStream, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    const settle = (err: Error | null) => {
      stream.off('data', onData)
      stream.off('end', onEnd)
      stream.off('error', settle)
      if (!err) return resolve(Buffer.concat(chunks, size))
      stream.pause()
      reject(err)
    }
    const onData = (c: Buffer | string) => {
      const b = typeof c === 'string' ? Buffer.from(c) : c
      size += b.length
      if (size <= limit) chunks.push(b)
      else settle(new AppError('payload_too_large', `the request body is larger than ${limit} bytes`, { headers: { connection: 'close' } }))
    }
    const onEnd = () => settle(null)
    stream.on('data', onData)
    stream.once('end', onEnd)
    stream.once('error', settle)
    stream.resume()
  })
}
