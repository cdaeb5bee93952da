// Route-schema helpers: references to the shared components (so openapi.yaml names them)
// and the problem+json error responses a route can answer with.
import { Type } from 'typebox'
import { ERRORS, type ErrorCode } from '../errors.js'

export { ref } from '../schemas.js'

/** Response entries for the given error codes, grouped by HTTP status. */
export function problems(...codes: ErrorCode[]): Record<number, unknown> {
  const out: Record<number, unknown> = {}
  for (const code of ['unauthorized', 'rate_limited', ...codes] as ErrorCode[]) {
    const status = ERRORS[code].status
    const prev = out[status] as { description: string } | undefined
    out[status] = {
      description: prev ? `${prev.description}, ${code}` : `Problem: ${code}`,
      content: { 'application/problem+json': { schema: { $ref: 'Problem#' } } },
    }
  }
  return out
}

export const SessionParams = Type.Object({ id: Type.String({ maxLength: 64, description: 'Session id' }) })
export const ExecutionParams = Type.Object({
  id: Type.String({ maxLength: 64, description: 'Session id' }),
  eid: Type.String({ maxLength: 64, description: 'Execution id' }),
})
