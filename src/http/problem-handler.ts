// Turns every error into application/problem+json with a stable code; 5xx hide internals.
import { isUtf8 } from 'node:buffer'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { AppError, toProblem } from '../errors.js'

export function installProblemHandling(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError | AppError, req, reply) => {
    const appErr = toAppError(err)
    if (appErr.status >= 500 && appErr.status !== 503) req.log.error({ err }, 'request failed')
    else if (appErr.status === 503) req.log.warn({ code: appErr.code, detail: appErr.message }, 'request refused: unavailable')
    else req.log.info({ code: appErr.code, detail: appErr.message }, 'request rejected')
    reply.code(appErr.status).headers(appErr.headers).type('application/problem+json')
    return reply.send(toProblem(appErr))
  })
  app.setNotFoundHandler((req, reply) => {
    reply
      .code(404)
      .type('application/problem+json')
      .send(toProblem(new AppError('not_found', `no route ${req.method} ${req.url.split('?')[0]}`)))
  })
  // JSON bodies: valid UTF-8, no NUL characters, then JSON.parse.
  app.removeContentTypeParser(['application/json', 'text/plain'])
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body: Buffer, done) => {
    // JSON is UTF-8 (RFC 8259); a body declared in another charset is refused rather than misread.
    const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(req.headers['content-type'] ?? '')?.[1]?.toLowerCase()
    if (charset && charset !== 'utf-8' && charset !== 'utf8')
      return done(new AppError('unsupported_media_type', `send the body as application/json in UTF-8 (not ${charset})`))
    if (body.length === 0) return done(null, undefined)
    if (!isUtf8(body)) return done(new AppError('bad_request', 'the body is not valid UTF-8'))
    const text = body.toString('utf8')
    if (text.includes('\0') || /\\u0000/i.test(text)) return done(new AppError('bad_request', 'the body contains NUL characters'))
    try {
      done(null, JSON.parse(text))
    } catch (e) {
      done(new AppError('bad_request', `the body is not valid JSON: ${(e as Error).message}`))
    }
  })
}

/**
 * Fastify's `frameworkErrors` option: errors raised before routing (a URL that is not valid
 * percent-encoded UTF-8, FST_ERR_BAD_URL; a bad Content-Type header) answer problem+json too.
 */
export function frameworkErrorHandler(err: FastifyError, _req: FastifyRequest, reply: FastifyReply): void {
  const appErr = err.code === 'FST_ERR_BAD_URL' ? new AppError('bad_request', 'the URL is not valid percent-encoded UTF-8') : toAppError(err)
  reply.code(appErr.status).headers(appErr.headers).type('application/problem+json').send(toProblem(appErr))
}

function toAppError(err: FastifyError | AppError): AppError {
  if (err instanceof AppError) return err
  const fe = err
  if (fe.validation)
    return new AppError(
      'validation_failed',
      `${fe.validationContext ?? 'request'}${fe.validation[0]?.instancePath ?? ''} ${fe.validation[0]?.message ?? 'is invalid'}`.trim(),
    )
  switch (fe.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new AppError('payload_too_large', 'the request body is larger than the server accepts')
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new AppError('unsupported_media_type', 'send the body as application/json')
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new AppError('bad_request', fe.message)
  }
  if (fe.statusCode === 406) return new AppError('not_acceptable', 'this endpoint answers text/event-stream only')
  if (fe.statusCode && fe.statusCode >= 400 && fe.statusCode < 500) return new AppError('bad_request', fe.message)
  if (isBackendDown(err))
    return new AppError('unavailable', 'a backing service (Redis or the Docker engine) is unreachable; retry shortly', {
      headers: { 'retry-after': '2' },
      cause: err,
    })
  return new AppError('internal', undefined, { cause: err })
}

const DOWN_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH'])

/** Connection-level failures of Redis (ioredis) or the Docker engine: the service is degraded, not broken. */
function isBackendDown(err: unknown): boolean {
  const e = err as { name?: string; code?: string; message?: string } | null
  if (!e) return false
  if (e.name === 'MaxRetriesPerRequestError') return true
  if (e.code && DOWN_CODES.has(e.code)) return true
  return /^(Connection is closed|Stream isn't writeable)/.test(e.message ?? '')
}
