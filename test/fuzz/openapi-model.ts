// openapi.yaml as the fuzzer sees it: its operations (path, parameters, body, security, documented
// responses) and ajv validators for its schemas, so requests and answers are judged by the document alone.
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { parse } from 'yaml'
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js'
import addFormatsModule from 'ajv-formats'

const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (ajv: Ajv2020) => Ajv2020

export type Schema = Record<string, any>

interface Parameter {
  name: string
  in: 'path' | 'query' | 'header'
  required: boolean
  schema: Schema
}

export interface Operation {
  id: string
  method: string
  /** The path template, e.g. /v1/sessions/{id}. */
  path: string
  parameters: Parameter[]
  /** The application/json request body schema, when the operation takes a body. */
  body: Schema | null
  /** The media types of its request body (none: it takes no body). */
  bodyTypes: string[]
  secured: boolean
  /** status → media type → schema (undefined when the response has no content). */
  responses: Map<number, Map<string, Schema | undefined>>
}

const DOC_ID = 'https://replcast.invalid/openapi'

export class OpenApiModel {
  readonly doc: any
  readonly operations: Operation[]
  private readonly ajv: Ajv2020
  private readonly compiled = new Map<Schema, ValidateFunction>()

  constructor(yamlText: string) {
    // $refs point into the document's components; rewritten to absolute ones so any schema compiles alone.
    this.doc = rewriteRefs(parse(yamlText))
    this.ajv = addFormats(new Ajv2020({ strict: false, allErrors: false, validateFormats: true }))
    this.ajv.addSchema({ $id: DOC_ID, components: this.doc.components })
    this.operations = []
    for (const [path, item] of Object.entries<any>(this.doc.paths)) {
      for (const [method, op] of Object.entries<any>(item)) {
        const responses = new Map<number, Map<string, Schema | undefined>>()
        for (const [status, r] of Object.entries<any>(op.responses ?? {})) {
          const media = new Map<string, Schema | undefined>()
          for (const [type, m] of Object.entries<any>(r.content ?? {})) media.set(type, m.schema)
          responses.set(Number(status), media)
        }
        this.operations.push({
          id: op.operationId,
          method: method.toUpperCase(),
          path,
          parameters: (op.parameters ?? []).map((p: any) => ({ name: p.name, in: p.in, required: !!p.required, schema: p.schema ?? {} })),
          body: op.requestBody?.content?.['application/json']?.schema ?? null,
          bodyTypes: Object.keys(op.requestBody?.content ?? {}),
          secured: (op.security ?? this.doc.security ?? []).length > 0,
          responses,
        })
      }
    }
  }

  static load(): OpenApiModel {
    return new OpenApiModel(readFileSync(fileURLToPath(new URL('../../openapi.yaml', import.meta.url)), 'utf8'))
  }

  /** Follows a (rewritten) $ref to the component it names. */
  deref(schema: Schema): Schema {
    let s = schema
    for (let i = 0; i < 10 && typeof s?.$ref === 'string'; i++) {
      const name = String(s.$ref).split('/').pop()!
      s = this.doc.components.schemas[name]
    }
    return s
  }

  /** null when `value` is valid against `schema`, else the first error as text. */
  validate(schema: Schema | undefined, value: unknown): string | null {
    if (!schema) return null
    let v = this.compiled.get(schema)
    if (!v) {
      v = this.ajv.compile({ ...schema, $id: `${DOC_ID}/inline/${this.compiled.size}` })
      this.compiled.set(schema, v)
    }
    if (v(value)) return null
    const e = v.errors?.[0]
    return `${e?.instancePath || '(root)'} ${e?.message ?? 'is invalid'} ${e?.params ? JSON.stringify(e.params) : ''}`.trim()
  }

  /** The operation a request reaches: its method and the template its path matches (segment by segment). */
  route(method: string, pathname: string): Operation | null {
    const m = method === 'HEAD' ? 'GET' : method
    const segs = pathname.split('/')
    for (const op of this.operations) {
      if (op.method !== m) continue
      const t = op.path.split('/')
      if (t.length === segs.length && t.every((x, i) => x.startsWith('{') || x === segs[i])) return op
    }
    return null
  }
}

function rewriteRefs(node: any): any {
  if (Array.isArray(node)) return node.map(rewriteRefs)
  if (!node || typeof node !== 'object') return node
  const out: any = {}
  for (const [k, v] of Object.entries(node)) {
    out[k] = k === '$ref' && typeof v === 'string' && v.startsWith('#/') ? `${DOC_ID}${v}` : rewriteRefs(v)
  }
  return out
}
