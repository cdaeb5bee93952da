// While the instance closes, requests that still arrive (on kept-alive connections, or passed on by
// another instance) get the contract's answer, not Fastify's own 503 in plain JSON: 503 `unavailable`
// as problem+json with Retry-After, marked refused, so the hop of another instance that sent it asks
// the session's new holder instead (cluster/forward.ts), and the connection closes.
import type { FastifyInstance } from 'fastify'
import { REFUSED_HEADER } from '../cluster/index.js'
import { AppError } from '../errors.js'

/** Call before any other hook is added: the answer comes before authentication and everything else. Needs Fastify's `return503OnClosing: false`. */
export function installClosingAnswer(app: FastifyInstance): void {
  let closing = false
  // The first preClose hook: Fastify stops routing to its own closing answer before any of them runs.
  app.addHook('preClose', async () => {
    closing = true
  })
  app.addHook('onRequest', async () => {
    if (!closing) return
    throw new AppError('unavailable', 'this API instance is shutting down; try again (another instance answers)', {
      headers: { 'retry-after': '1', [REFUSED_HEADER]: '1', connection: 'close' },
    })
  })
}
