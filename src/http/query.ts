// One query-string parser for the routes and for the log: the log redacts a parameter by the name
// the routes read, after the same decoding, so any spelling the server accepts as `access_token`
// (`access%5Ftoken`, `access%5ftoken`, ...) is one the log redacts.

/** Fastify's query-string parser: names and values percent-decoded (`+` is a space); a repeated name gives a list. */
export function parseQuery(raw: string): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = Object.create(null) as Record<string, string | string[]>
  for (const [name, value] of new URLSearchParams(raw)) {
    const had = out[name]
    if (had === undefined) out[name] = value
    else if (Array.isArray(had)) had.push(value)
    else out[name] = [had, value]
  }
  return out
}

const SECRET_PARAMS = new Set(['access_token'])

/** The URL with the value of every secret parameter replaced, the rest as it came. */
export function redactUrl(url: string): string {
  const q = url.indexOf('?')
  if (q < 0) return url
  const parts = url.slice(q + 1).split('&')
  const kept = parts.map((part) => {
    const [name] = [...new URLSearchParams(part).keys()]
    if (name === undefined || !SECRET_PARAMS.has(name)) return part
    const eq = part.indexOf('=')
    return `${eq < 0 ? part : part.slice(0, eq)}=[redacted]`
  })
  return `${url.slice(0, q)}?${kept.join('&')}`
}
