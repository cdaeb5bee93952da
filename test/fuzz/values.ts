// Values for the fuzzer: valid ones drawn from a schema of openapi.yaml (edges included: minimums,
// fractions, long and non-ASCII strings), and wrong ones of every other kind.
import type { Rng } from './random.js'
import type { OpenApiModel, Schema } from './openapi-model.js'

/**
 * Python code that leaves the session's state alone (no assignment to the variables the run checks, no
 * exit, nothing that runs long): it may run on the sessions created before the run.
 */
export const SAFE_CODE = [
  'print(1)',
  '1 + 1',
  'print("é" * 300)',
  'for i in range(50): print(i)',
  'import sys; sys.stderr.write("to stderr\\n")',
  'raise ValueError("fuzz")',
  '1/0',
  'print(',
  '',
  '   ',
  '# a comment',
  'import time; time.sleep(0.05); print("slept")',
  'def f(n): return f(n + 1)\nf(0)',
  '[i * i for i in range(10000)][-1]',
  'print("\\u202e\\u200b\\U0001f600")',
  'import json; print(json.dumps({"a": [1, 2, {"b": None}]}))',
  '__import__("os").getpid()',
  'display({"text/plain": "hi"})' /* display may or may not exist: either is fine */,
  'print("x" * 200000)',
  '_fuzz_tmp = list(range(100)); del _fuzz_tmp',
]

/** Commands for background processes: short, or waiting on stdin (then a signal, stdin's eof or a delete ends them). */
const SAFE_COMMANDS = [
  'echo fuzz',
  'for i in 1 2 3; do echo $i; sleep 0.1; done',
  'cat',
  'sleep 2',
  'exit 3',
  'echo to-stderr >&2',
  'printf "é%.0s" {1..300}',
  "head -c 100000 /dev/zero | tr '\\0' x",
  'no-such-command',
  "trap 'exit 0' TERM; sleep 5 & wait",
]

const ALPHA = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'
const PRINTABLE = ALPHA + '0123456789 !#$%&()*+,-./:;<=>?@[]^_`{|}~\'"\\'
const UNICODE = 'éßЖ中文日本語한국어عربى\u200b\u202e\u2028\u00a0😀🚀𝄞'

export function randomString(r: Rng, n: number): string {
  return r.weighted([
    [5, () => r.chars(n, ALPHA)],
    [3, () => r.chars(n, PRINTABLE)],
    [2, () => r.chars(n, PRINTABLE + UNICODE)],
    [1, () => r.chars(n, '\t\n\r ')],
  ] as const)()
}

/** Names for the keys of a free-form object: mostly plain, some of the kinds servers trip on. */
function keyName(r: Rng): string {
  return r.weighted([
    [6, () => r.pick(['_']) + r.chars(r.int(0, 12), ALPHA + '0123456789_')],
    [3, () => r.chars(r.int(1, 8), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ_')],
    [2, () => r.pick(['PATH', 'HOME', 'PYTHONPATH', 'LD_PRELOAD', 'REPLCAST_X', 'MPLBACKEND', '1BAD', 'A-B', 'A B', 'é', 'a.b', '$x'])],
    [1, () => r.pick(['', 'k'.repeat(64), 'k'.repeat(65), 'K'.repeat(128), 'K'.repeat(129)])],
  ] as const)()
}

function numberCandidates(s: Schema, integer: boolean): number[] {
  const lo = s.minimum ?? (s.exclusiveMinimum !== undefined ? s.exclusiveMinimum : undefined)
  const base = lo ?? 0
  const c = [base, base + 1, base * 2 + 1, base * 4 + 3, base * 16 + 10, base * 1000 + 7, 1e6, 2 ** 31, 2 ** 53 - 1]
  if (!integer) c.push(base + 1e-9, base + 0.001, base + 0.5, base + 1.7256087072778534, base + 2.5, 0.1, 3600.5)
  if (s.maximum !== undefined) c.push(s.maximum, s.maximum - 1, s.maximum - 0.5)
  return c.filter(
    (v) =>
      (!integer || Number.isInteger(v)) &&
      (s.minimum === undefined || v >= s.minimum) &&
      (s.exclusiveMinimum === undefined || v > s.exclusiveMinimum) &&
      (s.maximum === undefined || v <= s.maximum) &&
      (s.exclusiveMaximum === undefined || v < s.exclusiveMaximum),
  )
}

/** A random JSON value (for schemas that allow anything). */
export function anyJson(r: Rng, depth = 0): unknown {
  const kinds = depth > 3 ? 5 : 7
  switch (r.int(0, kinds - 1)) {
    case 0:
      return null
    case 1:
      return r.chance(0.5)
    case 2:
      return r.pick([0, -1, 1.5, 1e300, 42])
    case 3:
    case 4:
      return randomString(r, r.int(0, 30))
    case 5:
      return Array.from({ length: r.int(0, 4) }, () => anyJson(r, depth + 1))
    default:
      return Object.fromEntries(Array.from({ length: r.int(0, 4) }, () => [keyName(r), anyJson(r, depth + 1)]))
  }
}

function stringFor(r: Rng, s: Schema, hint: string): string {
  if (s.format === 'date-time') return new Date(r.int(0, 4e12)).toISOString()
  if (hint === 'code') return r.pick(SAFE_CODE)
  if (hint === 'command') return r.pick(SAFE_COMMANDS)
  // A long pattern is rarely met by chance: the schema's own example stands in for it.
  const example = Array.isArray(s.examples) ? (s.examples as unknown[]).find((e): e is string => typeof e === 'string') : undefined
  if (example !== undefined && (s.pattern || r.chance(0.3))) return example
  const max = s.maxLength ?? 100_000
  const min = s.minLength ?? 0
  const n = r.weighted([
    [8, () => r.int(min, Math.min(max, Math.max(min, 24)))],
    [2, () => Math.max(min, max <= 5000 ? max : r.int(200, 3000))],
    [1, () => min],
  ] as const)()
  for (let i = 0; i < 50; i++) {
    const v = randomString(r, n)
    if (!s.pattern || new RegExp(s.pattern, 'u').test(v)) return v
  }
  return s.pattern ? 'A' : randomString(r, n)
}

/** A value the schema accepts, drawn to include its edges. `hint` is the property's name. */
export function validValue(model: OpenApiModel, schema: Schema | undefined, r: Rng, hint = '', depth = 0): unknown {
  const s = schema ? model.deref(schema) : {}
  if (s.const !== undefined) return s.const
  if (Array.isArray(s.enum)) return r.pick(s.enum)
  const union = s.anyOf ?? s.oneOf
  if (Array.isArray(union)) return validValue(model, r.pick(union), r, hint, depth)
  if (Array.isArray(s.allOf)) return validValue(model, s.allOf[0], r, hint, depth)
  const type = Array.isArray(s.type) ? r.pick(s.type as string[]) : s.type
  switch (type) {
    case 'string':
      return stringFor(r, s, hint)
    case 'integer':
    case 'number': {
      const c = numberCandidates(s, type === 'integer')
      return c.length ? r.pick(c) : (s.minimum ?? 1)
    }
    case 'boolean':
      return r.chance(0.5)
    case 'null':
      return null
    case 'array': {
      const n = r.int(s.minItems ?? 0, Math.min(s.maxItems ?? 3, 3))
      return Array.from({ length: n }, () => validValue(model, s.items, r, hint, depth + 1))
    }
    case 'object':
      return validObject(model, s, r, depth)
    default:
      return anyJson(r, depth)
  }
}

function validObject(model: OpenApiModel, s: Schema, r: Rng, depth: number): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  const required = new Set<string>(s.required ?? [])
  for (const [name, ps] of Object.entries<Schema>(s.properties ?? {})) {
    if (required.has(name) || (depth < 3 && r.chance(0.5))) out[name] = validValue(model, ps, r, name, depth + 1)
  }
  // Keys beyond the named ones: of the additionalProperties schema, or anything when it has none.
  const extra = s.additionalProperties ?? (s.properties ? undefined : {})
  if (extra && typeof extra === 'object' && depth < 3) {
    const n = r.int(0, Math.min(3, s.maxProperties ?? 3))
    for (let i = 0; i < n; i++) {
      let k = keyName(r)
      for (let j = 0; j < 50 && s.propertyNames?.pattern && !new RegExp(s.propertyNames.pattern, 'u').test(k); j++) k = keyName(r)
      if (!Object.hasOwn(out, k))
        Object.defineProperty(out, k, { value: validValue(model, extra, r, k, depth + 1), enumerable: true, writable: true, configurable: true })
    }
  }
  // An if/then rule of the object ("context needs mode: agent"): met by setting the constants it asks for.
  if (s.if && s.then && model.validate(s.if, out) === null) {
    for (const [name, ps] of Object.entries<Schema>(s.then.properties ?? {})) if (ps.const !== undefined) out[name] = ps.const
  }
  return out
}

/** A value of another JSON type than the schema's. */
export function wrongType(model: OpenApiModel, schema: Schema | undefined, r: Rng): unknown {
  const s = schema ? model.deref(schema) : {}
  const type = s.type ?? (s.anyOf ? 'string' : undefined)
  const all: Array<[string, unknown]> = [
    ['string', r.pick(['5', 'true', '', 'null', '{}'])],
    ['integer', r.pick([5, 0, -1])],
    ['number', r.pick([1.5, -0.5])],
    ['boolean', r.chance(0.5)],
    ['null', null],
    ['array', r.pick([[], [1], ['x'], [[]]])],
    ['object', r.pick([{}, { a: 1 }, { '': null }])],
  ]
  // An integer is a number, so it is no wrong type for one (fractions for integers come from edgeNumber).
  const others = all.filter(([t]) => t !== type && !(type === 'number' && t === 'integer'))
  return r.pick(others)[1]
}

/** Numbers servers mishandle: fractions, signed zero, huge, tiny, just past a bound. */
export function edgeNumber(schema: Schema | undefined, r: Rng): number {
  const s = schema ?? {}
  const near = [s.minimum, s.maximum, s.exclusiveMinimum, s.exclusiveMaximum].filter((v): v is number => typeof v === 'number')
  const bound = near.length ? r.pick(near) : 0
  return r.pick([
    bound - 1,
    bound + 1,
    bound,
    bound + 0.5,
    bound - 1e-9,
    1.5,
    0.1,
    -0,
    -1,
    0,
    1e308,
    -1e308,
    2 ** 53 + 1,
    2 ** 63,
    5e-324,
    1e-7,
    1.7256087072778534,
  ])
}

/** Nested arrays or objects `depth` deep, as JSON text. */
export function deepJson(r: Rng, depth: number): string {
  return r.chance(0.5) ? '['.repeat(depth) + ']'.repeat(depth) : '{"a":'.repeat(depth) + '1' + '}'.repeat(depth)
}
