// Multi-line input for the console, decided the way Python's own console does: open brackets,
// an unfinished triple-quoted string or a trailing backslash ask for more, and a compound statement
// (a line ending in ':') runs when an empty line ends it.

interface Scan {
  /** Brackets still open at the end. */
  depth: number
  /** Inside a triple-quoted string at the end. */
  inTriple: boolean
  /** The last character of the last line outside strings and comments ('' if none). */
  lastChar: string
  /** Some line ended (outside brackets) with ':'. */
  compound: boolean
}

function scan(src: string): Scan {
  let depth = 0
  let quote = '' // the open string's delimiter: ', ", ''' or """
  let lastChar = ''
  let compound = false
  for (let i = 0; i < src.length; i++) {
    const c = src[i]!
    if (quote) {
      if (c === '\\') i++
      else if (src.startsWith(quote, i)) {
        i += quote.length - 1
        quote = ''
        lastChar = c
      } else if (c === '\n' && quote.length === 1) quote = '' // an unterminated one-line string: Python's error to report
      continue
    }
    if (c === '#') {
      while (i + 1 < src.length && src[i + 1] !== '\n') i++
    } else if (c === '"' || c === "'") {
      quote = src.startsWith(c.repeat(3), i) ? c.repeat(3) : c
      i += quote.length - 1
    } else if ('([{'.includes(c)) depth++
    else if (')]}'.includes(c)) depth = Math.max(0, depth - 1)
    if (c === '\n') {
      if (lastChar === ':' && depth === 0) compound = true
      lastChar = ''
    } else if (c !== ' ' && c !== '\t' && c !== '#') lastChar = c
  }
  if (lastChar === ':' && depth === 0) compound = true
  return { depth, inTriple: quote.length === 3, lastChar, compound }
}

// Lines that carry on a compound statement at column 0 instead of ending it.
const CONTINUES = /^(elif|else|except|finally|case)\b/

export class InputBuffer {
  private lines: string[] = []

  /** Whether lines are waiting for more (the prompt is then '... '). */
  get pending(): boolean {
    return this.lines.length > 0
  }

  /** Takes one line; returns the sources now complete, to run in order (none, one, or two). */
  feed(line: string): string[] {
    if (!this.lines.length && !line.trim()) return []
    const before = this.lines.length ? scan(this.lines.join('\n')) : null
    // Piped input often has no empty line after a block: an unindented line ends the block before it.
    if (before?.compound && before.depth === 0 && !before.inTriple && line.trim() && !/^\s/.test(line) && !CONTINUES.test(line) && before.lastChar !== '\\') {
      const done = this.flush()
      return [...(done ? [done] : []), ...this.feed(line)]
    }
    this.lines.push(line)
    const s = scan(this.lines.join('\n'))
    if (s.depth > 0 || s.inTriple || s.lastChar === '\\') return []
    if (s.compound && line.trim() !== '') return []
    const done = this.flush()
    return done ? [done] : []
  }

  /** Whatever is buffered, as one source ('' when nothing), and a fresh start. */
  flush(): string {
    const src = this.lines.join('\n').trimEnd()
    this.lines = []
    return src
  }
}
