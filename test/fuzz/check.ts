// What every answer must be, judged by openapi.yaml and src/errors.ts alone: an answer (no dropped
// connection), no 5xx but a documented 503, a documented status, problem+json with a registered code
// for every error, bodies and events valid against their schemas, no other tenant's data.
import { ERRORS } from '../../src/errors.js'
import type { OpenApiModel } from './openapi-model.js'
import type { Spec } from './requests.js'
import type { Answer } from './send.js'

const baseType = (ct: string) => ct.split(';')[0]!.trim().toLowerCase()

/** Node answers headers past its limit (16 KiB) itself, with 431, and may close before the client has read it. */
function headTooLarge(spec: Spec): boolean {
  const size = spec.raw?.length ?? spec.url.length + Object.entries(spec.headers).reduce((n, [k, v]) => n + k.length + v.length + 4, 0)
  return size > 16 * 1024
}

/** The reasons `answer` breaks the contract (none: it keeps it). */
export function check(model: OpenApiModel, base: string, spec: Spec, a: Answer): string[] {
  const out: string[] = []
  if (a.timedOut) return [`no answer within the deadline (${Math.round(a.ms)} ms)`]
  if (a.error && !(headTooLarge(spec) && !a.status)) return [`dropped connection: ${a.error}`]
  if (!a.status) return out
  if (a.status === 431 && headTooLarge(spec)) return out
  const problem = a.status >= 400 ? parseJson(a.text) : undefined

  if (spec.raw) {
    if (spec.mustRefuse && a.status !== 400) out.push(`a request target that is not a path answered ${a.status}, not 400`)
    if (a.status >= 500) out.push(`server error ${a.status} for malformed HTTP`)
    if (a.status >= 400) out.push(...problemShape(a, problem))
    return out
  }

  const pathname = new URL(base + spec.url).pathname
  const op = model.route(spec.method, pathname)
  const head = spec.method === 'HEAD'
  if (!op) {
    if (a.status !== 404 && a.status !== 400) out.push(`no operation has ${spec.method} ${pathname}, but the answer was ${a.status}, not 404`)
    if (!head) out.push(...problemShape(a, problem))
    return out
  }
  const documented = op.responses.get(a.status)
  if (!documented) out.push(`status ${a.status}${problem?.code ? ` (${problem.code})` : ''} is not documented for ${op.id}`)
  if (a.status >= 500 && !(a.status === 503 && documented)) out.push(`server error ${a.status}${problem?.code ? ` ${problem.code}` : ''}`)
  if (head) return out

  const type = baseType(a.contentType)
  if (a.status >= 400) {
    const schemaType = documented && !documented.has('application/problem+json') && documented.has(type) ? type : null
    if (schemaType) {
      const err = model.validate(documented!.get(schemaType), problem)
      if (err) out.push(`${a.status} body does not match its schema: ${err}`)
    } else {
      out.push(...problemShape(a, problem))
      const err = documented?.has('application/problem+json') ? model.validate(documented.get('application/problem+json'), problem) : null
      if (problem && err) out.push(`${a.status} problem does not match its documented schema: ${err}`)
    }
    if (spec.validPerDoc && problem?.code === 'validation_failed') out.push(`valid per openapi.yaml, refused as invalid: ${String(problem.detail)}`)
    return out
  }

  if (spec.crossTenant) out.push(`another tenant's resource answered ${a.status}`)
  if (!documented) return out
  if (documented.size === 0) {
    if (a.text.length) out.push(`${a.status} has a body but none is documented`)
    return out
  }
  if (!documented.has(type)) {
    out.push(`${a.status} answered ${type || 'no content type'}; documented: ${[...documented.keys()].join(', ')}`)
    return out
  }
  if (type === 'application/json') {
    const body = parseJson(a.text)
    const err = body === undefined ? 'not JSON' : model.validate(documented.get(type), body)
    if (err) out.push(`${a.status} body does not match its schema: ${err}`)
  } else if (type === 'text/event-stream') {
    const eventSchema = model.doc.components.schemas.Event
    for (const e of a.events) {
      const data = parseJson(e.data) as Record<string, unknown> | undefined
      if (!data) out.push(`event ${e.event} data is not JSON`)
      else if (data.type !== e.event) out.push(`event ${e.event} carries type ${String(data.type)}`)
      else {
        const err = model.validate(eventSchema, { id: e.id, ...data })
        if (err) out.push(`event ${e.event} does not match Event: ${err}`)
      }
    }
    // An execution's stream ends with one `done`, a background process's output with one `exit`.
    const last = op.id === 'streamProcessOutput' ? 'exit' : 'done'
    const ends = a.events.filter((e) => e.event === last).length
    // After another stream's id (odd headers), what follows is undefined, but never two ends.
    if (ends > 1 || (a.complete && ends !== 1 && !spec.foreignResume)) out.push(`the stream ended with ${ends} ${last} events`)
  }
  return out
}

function problemShape(a: Answer, problem: Record<string, any> | undefined): string[] {
  const out: string[] = []
  if (baseType(a.contentType) !== 'application/problem+json')
    out.push(`${a.status} is ${a.contentType || 'without a content type'}, not application/problem+json`)
  if (!problem || typeof problem.code !== 'string') return [...out, `${a.status} has no problem code: ${a.text.slice(0, 120)}`]
  const known = (ERRORS as Record<string, { status: number }>)[problem.code]
  if (!known) out.push(`unknown problem code ${problem.code}`)
  else if (known.status !== a.status) out.push(`code ${problem.code} is registered with ${known.status}, answered with ${a.status}`)
  if (problem.status !== a.status) out.push(`problem.status ${problem.status} differs from the HTTP status ${a.status}`)
  return out
}

function parseJson(text: string): Record<string, any> | undefined {
  try {
    return JSON.parse(text) as Record<string, any>
  } catch {
    return undefined
  }
}
