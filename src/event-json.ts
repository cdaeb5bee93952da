// An output event's JSON with its text escaped once. A `stdout` event's text is up to a REPL frame
// (64 Ki characters) and escaping it is most of what an event costs the API: the escaped text is made once,
// when the output arrives, and goes as it is into the event's byte count, its Redis entry and the
// data of every SSE client on this instance. Most of the time it is not even made: the REPL's frame
// line already holds the text escaped as JSON.stringify would (frameTextJson), and that part of the
// line is taken as it is.

/**
 * On an event object (or a frame): its `text` and that text as JSON. Symbol-keyed, so object spreads
 * and rests carry it along with the event's fields and JSON.stringify leaves it out. A copy given
 * another text keeps the mark of the old one: it is used only while `text` is the text it was made for.
 */
const TEXT_JSON = Symbol('replcast.textJson')
/** Where the text goes in the JSON of the rest of the event. */
const HOLE = '"text":"\\u0000"'

interface Escaped {
  text: string
  json: string
}
type Marked = { text?: unknown; [TEXT_JSON]?: Escaped }

function markOf(event: unknown): Escaped | undefined {
  const mark = typeof event === 'object' && event !== null ? (event as Marked)[TEXT_JSON] : undefined
  return mark && mark.text === (event as Marked).text ? mark : undefined
}

/** Escapes `event.text` (when it is a string) once, for eventJson of this event and of its copies, unless its mark already holds it. */
export function withTextJson<T extends object>(event: T): T {
  const e = event as Marked
  if (typeof e.text === 'string' && !markOf(e)) e[TEXT_JSON] = { text: e.text, json: JSON.stringify(e.text) }
  return event
}

/** JSON.stringify(event), taking the text as withTextJson escaped it. */
export function eventJson(event: unknown): string {
  const mark = markOf(event)
  if (!mark) return JSON.stringify(event)
  // "\u0000" as the text, then that swapped for it: a field's value cannot hold HOLE unescaped (its
  // quotes would be). Joined with +, not replace(): V8 then keeps the parts (no copy of the text).
  const rest = JSON.stringify({ ...(event as object), text: '\u0000' })
  const at = rest.indexOf(HOLE)
  return rest.slice(0, at) + '"text":' + mark.json + rest.slice(at + HOLE.length)
}

/** `to` gets the mark of `from` (a frame, the event made of it) while their text is the same. */
export function keepTextJson<T extends object>(from: object, to: T): T {
  const mark = markOf(from)
  if (mark && mark.text === (to as Marked).text) (to as Marked)[TEXT_JSON] = mark
  return to
}

// A stream frame as the REPL writes it (Python's C JSON encoder, compact, keys in this order), or a
// background process's output frame:
// {"v":1,"type":"stream","exec_id":"…","name":"stdout","text":"…","seq":7}
// {"v":1,"type":"proc_output","proc_id":"…","pos":3,"name":"stdout","text":"…","seq":8}
const STREAM_HEAD = /^\{"v":\d+,"type":"(?:stream","exec_id":"[\w-]*"|proc_output","proc_id":"[\w-]*","pos":\d+),"name":"std(?:out|err)","text":"/
const STREAM_TAIL = '","seq":'
const DIGITS_AND_BRACE = /^\d+\}$/
const BACKSLASH = 92

/**
 * Marks `frame` (parsed from `line`) with its text's JSON taken from the line, when the line is a
 * stream frame of the REPL's exact shape and that part of it is what JSON.stringify(frame.text)
 * gives: ASCII with no \u escape (the REPL escapes all else as \uXXXX, JSON.stringify does not),
 * and a single string (no unescaped quote: anything else, say a forged frame with more keys, is
 * escaped anew). The line parsed as JSON, so the part is the text's own token. True when it marked it.
 */
export function frameTextJson(line: string, frame: object): boolean {
  const text = (frame as Marked).text
  if (typeof text !== 'string') return false
  const head = STREAM_HEAD.exec(line)
  if (!head) return false
  const from = head[0].length
  const to = line.lastIndexOf(STREAM_TAIL)
  if (to < from || !DIGITS_AND_BRACE.test(line.slice(to + STREAM_TAIL.length))) return false
  const inner = line.slice(from, to)
  if (inner.includes('\\u')) return false
  for (let q = inner.indexOf('"'); q >= 0; q = inner.indexOf('"', q + 1)) {
    let escapes = 0
    while (inner.charCodeAt(q - 1 - escapes) === BACKSLASH) escapes++
    if (escapes % 2 === 0) return false
  }
  ;(frame as Marked)[TEXT_JSON] = { text, json: line.slice(from - 1, to + 1) }
  return true
}
