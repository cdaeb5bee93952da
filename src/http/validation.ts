// Request validation: the component schemas are registered once (for $refs, serialization and
// openapi.yaml); bodies are validated without type coercion ({"code": true} is an error, not
// "True"), while path and query strings are coerced from text as usual.
import { Ajv, type Options } from 'ajv'
import addFormatsModule from 'ajv-formats'
import type { FastifyInstance } from 'fastify'
import type { TSchema } from 'typebox'

// ajv-formats is CommonJS; under NodeNext its default export arrives wrapped.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (ajv: Ajv) => Ajv

export function installValidation(app: FastifyInstance, components: TSchema[]): void {
  // verbose: each error carries the schema that failed, for problem-handler.ts's wording.
  const base: Options = { useDefaults: true, removeAdditional: false, addUsedSchema: false, allErrors: false, strict: false, verbose: true }
  const bodies = addFormats(new Ajv({ ...base, coerceTypes: false }))
  const strings = addFormats(new Ajv({ ...base, coerceTypes: 'array' }))
  for (const s of components) {
    app.addSchema(s)
    bodies.addSchema(s)
    strings.addSchema(s)
  }
  app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === 'body' ? bodies : strings).compile(schema))
}
