// Request bodies that are wrong: a valid body mutated one field at a time (missing, wrong type, edge
// numbers, unknown and prototype keys, deep nesting, long strings, invalid UTF-8, NUL), bodies that are
// not JSON or not declared as such, and bodies sent to operations that take none.
import type { Rng } from './random.js'
import type { OpenApiModel, Schema } from './openapi-model.js'
import { anyJson, deepJson, edgeNumber, randomString, wrongType } from './values.js'

interface Mutated {
  body: Buffer
  validPerDoc: boolean
  why: string
  /** The kind of mutation, without its details. */
  kind: string
}

/** Walks to a random property of the value (objects only), returning its holder, name and schema. */
function pickField(model: OpenApiModel, schema: Schema, value: any, r: Rng): { holder: any; key: string; schema: Schema | undefined } | null {
  let holder = value
  let s: Schema | undefined = model.deref(schema)
  let found: { holder: any; key: string; schema: Schema | undefined } | null = null
  for (let depth = 0; depth < 3 && holder && typeof holder === 'object' && !Array.isArray(holder); depth++) {
    const keys = Object.keys(holder)
    if (!keys.length) break
    const key = r.pick(keys)
    const fs: Schema | undefined = s?.properties?.[key] ?? (typeof s?.additionalProperties === 'object' ? s.additionalProperties : undefined)
    found = { holder, key, schema: fs ? model.deref(fs) : undefined }
    if (!r.chance(0.4)) break
    holder = holder[key]
    s = found.schema
  }
  return found
}

const splice = (json: string, insert: string) => (json === '{}' ? `{${insert}}` : `{${insert},${json.slice(1)}`)

export function mutatedBody(model: OpenApiModel, schema: Schema, r: Rng, bodyLimit: number, valid: any): Mutated {
  const s = model.deref(schema)
  const value = structuredClone(valid)
  const field = pickField(model, s, value, r)
  const kind = r.weighted([
    [4, 'missing required field'],
    [5, 'wrong type'],
    [5, 'edge number'],
    [4, 'unknown key'],
    [3, 'prototype key'],
    [2, 'deep nesting'],
    [3, 'long string'],
    [2, 'invalid UTF-8'],
    [2, 'NUL'],
    [2, 'odd unicode'],
    [2, 'not an object'],
    [1, 'textual number'],
  ] as const)
  const done = (v: unknown, why: string = kind): Mutated => ({ body: Buffer.from(JSON.stringify(v)), validPerDoc: model.validate(s, v) === null, why, kind })
  const text = (t: string | Buffer, why: string = kind): Mutated => ({ body: Buffer.isBuffer(t) ? t : Buffer.from(t), validPerDoc: false, why, kind })
  switch (kind) {
    case 'missing required field': {
      const req: string[] = s.required ?? []
      if (!req.length) return { ...done({ ...value, [r.pick(['', 'x', 'Code'])]: 1 }, 'unknown key'), kind: 'unknown key' }
      delete value[r.pick(req)]
      return done(value)
    }
    case 'wrong type':
      if (!field) return done(wrongType(model, s, r))
      field.holder[field.key] = wrongType(model, field.schema, r)
      return done(value)
    case 'edge number':
      if (!field) return done(value)
      field.holder[field.key] = edgeNumber(field.schema, r)
      return done(value)
    case 'unknown key': {
      const target = field && field.holder[field.key] && typeof field.holder[field.key] === 'object' && r.chance(0.5) ? field.holder[field.key] : value
      target[r.pick(['unknown', 'extra_field', 'Code', 'CODE', 'code ', '', 'hasOwnProperty', 'toString', 'valueOf', '__defineGetter__'])] = anyJson(r)
      return done(value)
    }
    case 'prototype key': {
      const key = r.pick(['__proto__', 'constructor', 'prototype'])
      const inner = r.pick(['{"polluted":true}', '{"prototype":{"polluted":true}}', 'null', '1', '"x"'])
      const json = JSON.stringify(value)
      if (field && field.holder !== value && r.chance(0.5)) {
        // Nested: into the holder's own JSON text.
        const nested = JSON.stringify(field.holder)
        return text(json.replace(nested, splice(nested, `"${key}":${inner}`)), `${kind} (nested)`)
      }
      return text(splice(json, `"${key}":${inner}`))
    }
    case 'deep nesting': {
      const depth = r.pick([50, 500, 5000, Math.floor(bodyLimit / 2.5)])
      const json = JSON.stringify(value)
      if (field) return text(json.replace(`"${field.key}":${JSON.stringify(field.holder[field.key])}`, `"${field.key}":${deepJson(r, depth)}`))
      return text(splice(json, `"context":${deepJson(r, depth)}`))
    }
    case 'long string': {
      const max = field?.schema?.maxLength
      const n = r.pick([max !== undefined ? max + 1 : 5000, 10_000, bodyLimit + r.int(1, 4096)])
      if (field) field.holder[field.key] = randomString(r, 1).repeat(n)
      else value.code = 'x'.repeat(n)
      return done(value)
    }
    case 'invalid UTF-8': {
      const json = Buffer.from(JSON.stringify({ ...value, [field?.key ?? 'code']: 'AB' }))
      const at = json.indexOf('"AB"') + 2
      const bad = Buffer.from([r.pick([0xff, 0xc0, 0xf8, 0x80, 0xed, 0xe2]), r.pick([0x28, 0xa0, 0xff, 0x82])])
      return text(Buffer.concat([json.subarray(0, at), bad, json.subarray(at)]))
    }
    case 'NUL': {
      const key = field?.key ?? 'code'
      const json = JSON.stringify({ ...value, [key]: 'A\u0000B' })
      return r.pick([() => text(json), () => text(json.replace('\\u0000', '\u0000')), () => text(splice(JSON.stringify(value), '"k\\u0000":"v"'))])()
    }
    case 'odd unicode': {
      const key = field?.key ?? 'code'
      const json = JSON.stringify({ ...value, [key]: 'ODD' })
      return text(json.replace('"ODD"', r.pick(['"\\ud800"', '"\\udfff\\ud800"', '"\ufeffx"', '"\u2028\u2029"', '"\\uFFFF"', '"e\u0301"'])))
    }
    case 'not an object':
      return done(r.pick([[], [value], 'x', 1, null, true, '']))
    case 'textual number': {
      const json = JSON.stringify({ ...value, [field?.key ?? 'timeout_s']: 12345 })
      return text(json.replace('12345', r.pick(['1e999', '-1e999', '1.0', '1E2', '0.0000001e7', '-0', '1e-400', '00012', '+1', '.5', '0x10'])))
    }
  }
}

/** Bodies that are not well-formed JSON, or not declared as JSON in UTF-8. */
export function badBody(r: Rng, valid: Buffer, bodyLimit: number): { body: Buffer; contentType: string | undefined; why: string } {
  const json = valid.toString()
  const asJson = (body: string | Buffer, why: string) => ({ body: Buffer.isBuffer(body) ? body : Buffer.from(body), contentType: 'application/json', why })
  return r.weighted<() => { body: Buffer; contentType: string | undefined; why: string }>([
    [4, () => asJson(json.slice(0, r.int(0, Math.max(0, json.length - 1))), 'truncated JSON')],
    [2, () => asJson(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), valid]), 'BOM')],
    [2, () => asJson(json === '{}' ? '{"a":1,"a":2}' : json.replace(/^\{("[^"]+":)/, '{$1null,$1'), 'duplicate keys')],
    [3, () => asJson(r.pick([json + 'x', json + json, `${json},`, `[${json}`, "{'a': 1}", '{"a":1,}', '{"a": NaN}', '// c\n' + json, 'nul', '']), 'not JSON')],
    [3, () => asJson(json + ' '.repeat(bodyLimit + r.int(1, 2048)), 'past the body limit')],
    [
      4,
      () => ({
        body: valid,
        contentType: r.pick([
          'text/plain',
          'application/x-www-form-urlencoded',
          'multipart/form-data; boundary=x',
          'application/xml',
          'application/json; charset=utf-16',
          'application/json; charset=latin1',
          'application/merge-patch+json',
          'application/jsonx',
          'json',
          '',
          ';;;',
          'application/json, text/plain',
          '*/*',
        ]),
        why: 'wrong content type',
      }),
    ],
    [
      2,
      () => ({
        body: valid,
        contentType: r.pick(['APPLICATION/JSON', 'application/json; charset=UTF-8', 'application/json;charset="utf-8"', 'application/json ; foo=bar']),
        why: 'content type variant',
      }),
    ],
    [2, () => ({ body: valid, contentType: undefined, why: 'no content type' })],
  ])()
}

/** A body sent to an operation that takes none (POST or DELETE without a request body). */
export function bodyOnBodyless(r: Rng, bodyLimit: number): { body: Buffer; contentType: string | undefined; why: string } {
  return r.pick([
    () => ({ body: Buffer.from('{"a":1}'), contentType: 'application/json', why: 'JSON' }),
    () => ({ body: Buffer.from('{"a":'), contentType: 'application/json', why: 'malformed JSON' }),
    () => ({ body: Buffer.from('hello'), contentType: 'text/plain', why: 'text' }),
    () => ({ body: Buffer.from('hello'), contentType: undefined, why: 'no content type' }),
    () => ({ body: Buffer.alloc(bodyLimit + 100, 0x20), contentType: 'application/json', why: 'past the body limit' }),
    () => ({ body: Buffer.from('{}'), contentType: 'application/xml', why: 'XML content type' }),
  ])()
}
