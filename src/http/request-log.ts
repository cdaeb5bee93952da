// Adds fields to a request's logger in place. Fastify makes that logger for the request alone (a
// child with its request id); a child of it per added field costs a new logger on every request.
import type { FastifyRequest } from 'fastify'
import type { Bindings, Logger } from 'pino'

export function bindRequestLog(req: FastifyRequest, bindings: Bindings): void {
  const log = req.log as Partial<Pick<Logger, 'setBindings'>>
  if (typeof log.setBindings === 'function') log.setBindings(bindings)
  else req.log = req.log.child(bindings)
}
