// Creates are placed on the Docker engine with the most free capacity (sessions/supply/engines.ts),
// whichever instance received them: routes marked `config: { placed: true }` (a session, a one-shot)
// are passed as they are to an instance on that engine, which makes the sandbox on its own engine
// and answers; a request passed on by another instance is never passed on again. One that instance
// may have acted on before it stopped is never made again here either.
import type { FastifyInstance } from 'fastify'
import type { Cluster } from '../cluster/index.js'
import { AppError } from '../errors.js'
import type { Engines } from '../sessions/index.js'

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route makes a sandbox: it runs on the engine with the most free capacity. */
    placed?: boolean
  }
}

export function installPlacement(app: FastifyInstance, cluster: Pick<Cluster, 'forward' | 'isInternal' | 'lookup'>, engines: Pick<Engines, 'place'>): void {
  app.addHook('preParsing', async (req, reply, payload) => {
    if (!req.routeOptions.config.placed || cluster.isInternal(req.raw)) return payload
    const target = await engines.place()
    if (!target) return payload
    for (const id of target.instances) {
      const url = await cluster.lookup(id)
      if (!url) continue
      const out = await cluster.forward(req.raw, reply.raw, url, () => {
        reply.hijack()
      })
      if (out.kind === 'answered' || out.kind === 'gone') {
        req.log.debug({ engine: target.engine, instance: id }, 'created on another engine')
        return payload
      }
      if (out.kind === 'unreachable' && out.reached) {
        // The instance stopped with the create in hand and may have made the sandbox: a 503 would invite
        // a retry and a second session. The client sees a cut, as if it had been connected there, and decides.
        req.log.warn({ err: out.err, engine: target.engine, instance: id }, 'the instance chosen for a create stopped during it; its connection is cut')
        reply.hijack()
        reply.raw.destroy()
        return payload
      }
      // Not answered there: another instance, or this engine, unless the body already went.
      if (req.raw.readableDidRead)
        throw new AppError('unavailable', 'the instance chosen for this sandbox did not answer; retry', { headers: { 'retry-after': '1' } })
      req.log.warn({ engine: target.engine, instance: id, outcome: out.kind }, 'could not pass a create to another engine')
    }
    return payload
  })
}
