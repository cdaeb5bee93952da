// Route-schema helpers: references to the shared components (so openapi.yaml names them), path
// parameters, and the problem+json error responses a route can answer with.
import { Type } from 'typebox'
import { ERRORS, type ErrorCode } from '../errors.js'
import { ExecutionId, ProcessId, SessionId, SnapshotId } from '../schemas.js'

export { ref } from '../schemas.js'

/**
 * Response entries for the error codes a route's own work can end in (session_dead, queue_full...),
 * grouped by HTTP status; route-problems.ts adds those that follow from the route's shape.
 */
export function problems(...codes: ErrorCode[]): Record<number, unknown> {
  const out: Record<number, unknown> = {}
  addProblems(out, codes)
  return out
}

const PROBLEM_PREFIX = 'Problem: '

/** Adds problem+json entries for `codes` to a route's responses, one per status, naming every code. */
export function addProblems(responses: Record<number, unknown>, codes: readonly ErrorCode[]): void {
  for (const code of codes) {
    const status = ERRORS[code].status
    const prev = responses[status] as { description?: string; content?: Record<string, unknown> } | undefined
    // Errors are always problem+json: a status documented with another body would be a lie.
    if (prev && (!prev.content?.['application/problem+json'] || !prev.description?.startsWith(PROBLEM_PREFIX)))
      throw new Error(`status ${status} is documented with another body, but the route can answer it with problem ${code}`)
    const listed = prev ? prev.description!.slice(PROBLEM_PREFIX.length).split(', ') : []
    if (listed.includes(code)) continue
    responses[status] = {
      description: PROBLEM_PREFIX + [...listed, code].join(', '),
      content: { 'application/problem+json': { schema: { $ref: 'Problem#' } } },
    }
  }
}

export const SessionParams = Type.Object({ id: SessionId })
export const SnapshotParams = Type.Object({ id: SnapshotId })
export const ExecutionParams = Type.Object({ id: SessionId, eid: ExecutionId })
export const ProcessParams = Type.Object({ id: SessionId, pid: ProcessId })

/** A list's page size when the query gives none. */
export const PAGE_SIZE = 50
/** The query of a paginated list: a page of `limit` items after `cursor`. */
export const PageQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: PAGE_SIZE })),
    cursor: Type.Optional(Type.String({ maxLength: 64, description: 'next_cursor of the previous page' })),
  },
  { additionalProperties: false },
)

/** A decimal number no greater than 2^64 - 1, as a regular expression (a part of a Redis stream id). */
function uint64Pattern(): string {
  const max = ((1n << 64n) - 1n).toString()
  const alternatives = [`\\d{1,${max.length - 1}}`, max]
  for (let i = 0; i < max.length; i++) {
    const digit = Number(max[i])
    const rest = max.length - i - 1
    if (digit > 0) alternatives.push(`${max.slice(0, i)}[0-${digit - 1}]${rest ? `\\d{${rest}}` : ''}`)
  }
  return `(?:${alternatives.join('|')})`
}

/** An event id ("ms-seq", each an unsigned 64-bit number) to resume after; empty means from the start. */
const EVENT_ID_PATTERN = `^(?:${uint64Pattern()}-${uint64Pattern()})?$`
export const EventId = (description: string) => Type.String({ pattern: EVENT_ID_PATTERN, examples: ['1732186234123-0'], description })
