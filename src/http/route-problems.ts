// The error responses a route has because of its shape, added to its schema when it is registered,
// so that openapi.yaml lists every status an operation can answer with (test/openapi-statuses.test.ts
// probes each one against the running server).
import type { FastifyInstance, RouteOptions } from 'fastify'
import type { ErrorCode } from '../errors.js'
import { isAuthenticatedRoute } from './auth.js'
import { addProblems } from './schema-refs.js'

/** Methods whose requests Fastify reads a body for, and so can refuse one (malformed, too large, not JSON). */
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])

/** The 404 that an id in the path leads to when it is unknown (or another tenant's); other parameters' routes name their own. */
const NOT_FOUND: Record<string, ErrorCode> = { id: 'session_not_found', eid: 'execution_not_found', pid: 'process_not_found' }

type RouteShape = Pick<RouteOptions, 'method' | 'url' | 'schema'> & { sse?: unknown; config?: { holder?: boolean } }

/** The error codes that follow from a route's shape alone. */
function shapeProblems(route: RouteShape): ErrorCode[] {
  const schema = (route.schema ?? {}) as Record<string, { properties?: Record<string, unknown> } | undefined>
  const codes: ErrorCode[] = []
  // The key check and the tenant's rate limit, counted in Redis (503 while Redis is away).
  if (isAuthenticatedRoute(route.url)) codes.push('unauthorized', 'rate_limited', 'unavailable')
  // A path id of the wrong shape (or not percent-encoded UTF-8) is a 400; a well-formed unknown one a 404.
  const params = Object.keys(schema.params?.properties ?? {})
  if (params.length) codes.push('validation_failed', 'bad_request', ...params.flatMap((p) => NOT_FOUND[p] ?? []))
  if (schema.querystring || schema.headers || schema.body) codes.push('validation_failed')
  // Fastify parses a body on these methods whether or not the route wants one, as JSON, unless the
  // route's body is of other media types (an upload, with a parser and limit of its own).
  const media = (schema.body as { content?: Record<string, unknown> } | undefined)?.content
  const json = !media || 'application/json' in media
  if (json && [route.method].flat().some((m) => BODY_METHODS.has(m))) codes.push('bad_request', 'payload_too_large', 'unsupported_media_type')
  // An SSE-only route refuses a client that will not take text/event-stream.
  if (route.sse === 'only') codes.push('not_acceptable')
  // A route run by the session's holder (src/http/holder-routing.ts) waits a bounded time while the holder changes.
  if (route.config?.holder) codes.push('session_moving')
  return codes
}

/** Call before the routes are registered: each documented route's responses get its shape's problems. */
export function installRouteProblems(app: FastifyInstance): void {
  app.addHook('onRoute', (route) => {
    if (!route.schema || route.schema.hide) return
    const schema = route.schema as { response?: Record<number, unknown> }
    schema.response ??= {}
    addProblems(schema.response, shapeProblems(route))
  })
}
