// Routes marked `config: { holder: true }` need the session's sandbox: after authentication and
// before the body is read, the cluster decides whether this instance answers or the session's
// holder does (src/cluster/); a request the holder answered is this hook's, the route never runs.
// A WebSocket upgrade (a terminal) goes to the holder the same way, and its connection is then joined
// to the holder's.
import type { IncomingMessage } from 'node:http'
import type { FastifyInstance } from 'fastify'
import type { Cluster } from '../cluster/index.js'

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route runs on the instance that holds session `:id` (any instance may receive it). */
    holder?: boolean
  }
}

/** A session id as the path may carry it; anything else is left to the route's validation. */
const SESSION_ID = /^[A-Za-z0-9_-]{1,64}$/

export function installHolderRouting(app: FastifyInstance, cluster: Cluster): void {
  // The bytes a client sent after an upgrade request's head (Node hands them to the 'upgrade' event
  // only): a hop sends them on after the head.
  const heads = new WeakMap<IncomingMessage, Buffer>()
  app.server.on('upgrade', (req: IncomingMessage, _socket: unknown, head: Buffer) => {
    if (head.length) heads.set(req, head)
  })
  app.addHook('preParsing', async (req, reply, payload) => {
    if (!req.routeOptions.config.holder) return payload
    const sid = (req.params as { id?: string }).id
    if (!sid || !SESSION_ID.test(sid)) return payload
    const where = await cluster.route({
      sid,
      req: req.raw,
      res: reply.raw,
      internal: cluster.isInternal(req.raw),
      upgrade: req.ws ? { socket: req.raw.socket, head: heads.get(req.raw) ?? Buffer.alloc(0) } : undefined,
      onAnswer: () => {
        reply.hijack()
      },
    })
    if (where === 'forwarded') req.log.debug({ sessionId: sid }, 'answered by the session holder')
    return payload
  })
}
