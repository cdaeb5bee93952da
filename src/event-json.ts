// An output event's JSON with its text escaped once. A `stdout` event's text is up to a REPL frame
// (64 Ki characters) and escaping it is most of what an event costs the API: the escaped text is made once,
// when the output arrives, and goes as it is into the event's byte count, its Redis entry and the
// data of every SSE client on this instance.

/**
 * On an event object: its `text` as JSON. Symbol-keyed, so object spreads and rests carry it along
 * with the event's fields and JSON.stringify leaves it out.
 */
const TEXT_JSON = Symbol('replcast.textJson')
/** Where the text goes in the JSON of the rest of the event. */
const HOLE = '"text":"\\u0000"'

type Marked = { text?: unknown; [TEXT_JSON]?: string }

/** Escapes `event.text` (when it is a string) once, for eventJson of this event and of its copies (a copy given another text is marked again). */
export function withTextJson<T extends object>(event: T): T {
  const e = event as Marked
  if (typeof e.text === 'string') e[TEXT_JSON] = JSON.stringify(e.text)
  return event
}

/** JSON.stringify(event), taking the text as withTextJson escaped it. */
export function eventJson(event: unknown): string {
  const text = typeof event === 'object' && event !== null ? (event as Marked)[TEXT_JSON] : undefined
  if (text === undefined) return JSON.stringify(event)
  // "\u0000" as the text, then that swapped for it: a field's value cannot hold HOLE unescaped (its
  // quotes would be). Joined with +, not replace(): V8 then keeps the parts (no copy of the text).
  const rest = JSON.stringify({ ...(event as object), text: '\u0000' })
  const at = rest.indexOf(HOLE)
  return rest.slice(0, at) + '"text":' + text + rest.slice(at + HOLE.length)
}
