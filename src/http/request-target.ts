// Requests must name their target as a path (origin-form, `/path?query`): the absolute form
// (`GET http://host/path`), which Fastify's router would match by its path alone, and the asterisk
// form are refused before anything else looks at them, so no part of the service (the hop to a
// session's holder above all) ever sees a URL whose host the client chose.
import type { FastifyInstance } from 'fastify'
import { AppError } from '../errors.js'

/** Whether `target` is a path (and query), as an origin server expects it. */
function isOriginForm(target: string | undefined): boolean {
  return target !== undefined && target.startsWith('/')
}

/** The first onRequest hook: anything but origin-form answers 400 bad_request. */
export function installOriginFormOnly(app: FastifyInstance): void {
  app.addHook('onRequest', async (req) => {
    if (!isOriginForm(req.raw.url)) throw new AppError('bad_request', 'the request target must be a path (origin-form, such as /v1/sessions), not a URL')
  })
}
