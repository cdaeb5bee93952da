// Turns every error into application/problem+json with a stable code; 5xx hide internals.
import { isUtf8 } from 'node:buffer'
import type { Socket } from 'node:net'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { AppError, ERRORS, toProblem, type ErrorCode } from '../errors.js'

export function installProblemHandling(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError | AppError, req, reply) => {
    const appErr = toAppError(err)
    if (appErr.status >= 500 && appErr.status !== 503) req.log.error({ err }, 'request failed')
    else if (appErr.status === 503) req.log.warn({ code: appErr.code, detail: appErr.message }, 'request refused: unavailable')
    else req.log.info({ code: appErr.code, detail: appErr.message }, 'request rejected')
    reply.code(appErr.status).headers(appErr.headers).type('application/problem+json')
    return reply.send(toProblem(appErr))
  })
  // The last line: an error answer of a documented route that did not come through the handler above
  // (a plugin's own, such as @fastify/sse's 406 to a client that refuses text/event-stream) becomes
  // problem+json too. Routes hidden from openapi.yaml (MCP's JSON-RPC) keep their own error bodies.
  app.addHook('onSend', async (req, reply, payload) => {
    if (reply.statusCode < 400 || isProblemType(reply.getHeader('content-type'))) return payload
    if (req.routeOptions.schema?.hide || documentsOtherBody(req, reply.statusCode)) return payload
    const appErr = fromStatus(reply.statusCode, payload)
    req.log[appErr.status >= 500 ? 'error' : 'info']({ code: appErr.code, detail: appErr.message, rewritten: true }, 'request rejected')
    reply.code(appErr.status).type('application/problem+json')
    reply.removeHeader('content-length')
    return JSON.stringify(toProblem(appErr))
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

/**
 * Fastify's `clientErrorHandler`: bytes that are not well-formed HTTP never reach a route; they get a
 * problem+json answer (400; 431 for headers past Node's limit; 408 when they came too slowly).
 */
export function clientErrorHandler(err: Error & { code?: string }, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return
  const appErr =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? new AppError('headers_too_large', 'the request headers are larger than the server accepts')
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? new AppError('request_timeout', 'the request did not arrive in time')
        : new AppError('bad_request', 'the request is not well-formed HTTP/1.1')
  const body = JSON.stringify(toProblem(appErr))
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${appErr.status} ${ERRORS[appErr.code].title}\r\nContent-Type: application/problem+json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    )
  }
  socket.destroy(err)
}

function isProblemType(contentType: ReturnType<FastifyReply['getHeader']>): boolean {
  return typeof contentType === 'string' && /^application\/problem\+json/i.test(contentType)
}

/** The route documents this status with a body of its own (readyz's 503 health report). */
function documentsOtherBody(req: FastifyRequest, status: number): boolean {
  const documented = (req.routeOptions.schema?.response as Record<number, { content?: Record<string, unknown> }> | undefined)?.[status]
  return !!documented && !documented.content?.['application/problem+json']
}

/** The registered code for an error answer that came without one (its status, else 400 or 500), keeping its message. */
function fromStatus(status: number, payload: unknown): AppError {
  const registered = status === 406 ? 'not_acceptable' : (Object.keys(ERRORS) as ErrorCode[]).find((c) => ERRORS[c].status === status)
  const code = registered ?? (status < 500 ? 'bad_request' : 'internal')
  let message: unknown
  try {
    message = (JSON.parse(String(payload)) as { message?: unknown }).message
  } catch {
    /* not JSON: the title will do */
  }
  return new AppError(code, code === 'internal' || typeof message !== 'string' ? undefined : message)
}

interface FailedSchema {
  then?: { description?: unknown }
  examples?: unknown[]
}

/** The text of a schema validation error; a rule's own wording when the schema gives one. */
function validationMessage(fe: FastifyError): string {
  // Ajv's errors (validation.ts turns on `verbose`, so each carries the schema that failed).
  const errors = (fe.validation ?? []) as Array<{ keyword: string; instancePath: string; message?: string; parentSchema?: FailedSchema }>
  const first = errors[0]
  const where = `${fe.validationContext ?? 'request'}${first?.instancePath ?? ''}`
  // An if/then rule ("context needs mode: agent") says what it wants in its then-description.
  const rule = errors.find((e) => e.keyword === 'if')?.parentSchema?.then?.description
  if (typeof rule === 'string') return `${fe.validationContext ?? 'request'}: ${rule}`
  // A long pattern with an example reads better as the example.
  const example = first?.keyword === 'pattern' ? first.parentSchema?.examples?.[0] : undefined
  if (typeof example === 'string') return `${where} must look like ${example}`
  return `${where} ${first?.message ?? 'is invalid'}`.trim()
}

function toAppError(err: FastifyError | AppError): AppError {
  if (err instanceof AppError) return err
  const fe = err
  if (fe.validation) return new AppError('validation_failed', validationMessage(fe))
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
