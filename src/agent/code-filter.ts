// Keeps what a "code only" model sends anyway from breaking the run: markdown fences are
// dropped, and so are prose lines (before, between or after code blocks). It works on the
// token stream without adding delay to ordinary code: a line is held back only while its
// first characters look like prose, and only until its end decides it.

const KEYWORDS = new Set([
  'False',
  'None',
  'True',
  'and',
  'as',
  'assert',
  'async',
  'await',
  'break',
  'class',
  'continue',
  'def',
  'del',
  'elif',
  'else',
  'except',
  'finally',
  'for',
  'from',
  'global',
  'if',
  'import',
  'in',
  'is',
  'lambda',
  'nonlocal',
  'not',
  'or',
  'pass',
  'raise',
  'return',
  'try',
  'while',
  'with',
  'yield',
  'match',
  'case',
  'print',
  'exec',
])
const STRING_PREFIXES = new Set(['r', 'u', 'b', 'f', 't', 'br', 'rb', 'fr', 'rf', 'tr', 'rt'])
const PLAIN_WORD = /^[A-Za-z][A-Za-z'’-]*[,.;:!?]*$/
const FENCE = /^\s*(```|~~~)/

type Decision = 'pass' | 'drop' | 'hold' | 'suspicious'

/** Tracks just enough Python lexing to know when a line start is inside a string or brackets; fed whole lines. */
class PyScan {
  private quote: string | null = null // ' " ''' """
  private escape = false
  private comment = false
  depth = 0
  continued = false

  get inside(): boolean {
    return this.depth > 0 || this.continued || (this.quote !== null && this.quote.length === 3)
  }

  feed(text: string): void {
    for (let i = 0; i < text.length; i++) {
      const c = text[i]!
      if (this.comment) {
        if (c === '\n') {
          this.comment = false
          this.continued = false
        }
        continue
      }
      if (this.quote) {
        if (this.escape) {
          this.escape = false
          continue
        }
        if (c === '\\') {
          this.escape = true
          continue
        }
        if (this.quote.length === 1) {
          if (c === this.quote || c === '\n') this.quote = null
        } else if (c === this.quote[0] && text.startsWith(this.quote, i)) {
          this.quote = null
          i += 2
        }
        continue
      }
      if (c === '#') {
        this.comment = true
        continue
      }
      if (c === '"' || c === "'") {
        const triple = c.repeat(3)
        if (text.startsWith(triple, i)) {
          this.quote = triple
          i += 2
        } else this.quote = c
        continue
      }
      if (c === '(' || c === '[' || c === '{') this.depth++
      else if ((c === ')' || c === ']' || c === '}') && this.depth > 0) this.depth--
      if (c === '\n') this.continued = false
      else if (c === '\\' && text[i + 1] === '\n') this.continued = true
      else if (c !== ' ' && c !== '\t' && c !== '\r') this.continued = false
    }
  }
}

export class CodeFilter {
  private line = ''
  private decision: Decision = 'hold'
  private inFence = false
  private fenceSeen = false
  private readonly scan = new PyScan()
  /** Lines dropped as prose or fences so far (for logs and tests). */
  dropped: string[] = []

  /** Feeds model text; returns the part that is code and may run now. */
  push(text: string): string {
    let out = ''
    for (const c of text) {
      if (this.decision === 'pass') {
        out += c
        this.line += c
        if (c === '\n') {
          this.scan.feed(this.line)
          this.reset()
        }
        continue
      }
      if (this.decision === 'drop') {
        this.line += c
        if (c === '\n') {
          this.dropped.push(this.line)
          this.reset()
        }
        continue
      }
      this.line += c
      const complete = c === '\n'
      this.decision = this.decide(complete)
      if (this.decision === 'pass') {
        out += this.line
        if (complete) {
          this.scan.feed(this.line)
          this.reset()
        }
      } else if (complete) {
        if (this.decision !== 'drop') throw new Error('undecided complete line') // decide() always decides complete lines
        this.dropped.push(this.line)
        this.reset()
      }
    }
    return out
  }

  /** The end of the reply: decides the last, unterminated line. */
  end(): string {
    if (!this.line || this.decision === 'pass' || this.decision === 'drop') {
      this.reset()
      return ''
    }
    this.line += '\n'
    const d = this.decide(true)
    const line = this.line.slice(0, -1)
    this.reset()
    if (d === 'pass') return line
    this.dropped.push(line)
    return ''
  }

  private reset(): void {
    this.line = ''
    this.decision = 'hold'
  }

  private decide(complete: boolean): Decision {
    const body = this.line.replace(/\r?\n$/, '')
    if (this.scan.inside) return 'pass'
    const trimmed = body.trimStart()
    if (trimmed.startsWith('`') || trimmed.startsWith('~~')) {
      if (!complete) return 'hold'
      if (FENCE.test(body)) {
        this.inFence = !this.inFence
        this.fenceSeen = true
      }
      return 'drop' // fence lines, and backtick lines which are not Python anyway
    }
    if (!trimmed) return complete ? (this.fenceSeen && !this.inFence ? 'drop' : 'pass') : 'hold'
    if (trimmed === '~' && !complete) return 'hold'
    if (this.fenceSeen && !this.inFence) return 'drop' // prose after or between code blocks
    if (body !== trimmed) return 'pass' // indented: part of a block
    const verdict = this.lineStart(body, complete)
    if (verdict !== 'suspicious') return verdict
    if (!complete) return 'hold'
    return isProse(body) ? 'drop' : 'pass'
  }

  /** Judges a column-0 line from its first characters: pass, hold (need more), or suspicious (judge the whole line). */
  private lineStart(body: string, complete: boolean): Decision {
    const c = body[0]!
    if (/\d/.test(c)) {
      const m = /^\d+([.)])?(\s)?/.exec(body)!
      if (m[0].length === body.length && !complete) return 'hold'
      return m[1] && m[2] ? 'suspicious' : 'pass'
    }
    if (c === '*' || c === '-' || c === '>') {
      if (body.length < 2 && !complete) return 'hold'
      return body[1] === ' ' ? 'suspicious' : 'pass'
    }
    if (!/[A-Za-z_]/.test(c)) return 'pass'
    const word = /^[A-Za-z_]\w*/.exec(body)![0]
    const rest = body.slice(word.length)
    if (!rest) return complete ? 'pass' : 'hold'
    if (KEYWORDS.has(word)) return 'pass'
    const next = rest[0]!
    if (next === "'" || next === '"') return STRING_PREFIXES.has(word.toLowerCase()) ? 'pass' : 'suspicious'
    if (next === '!') return rest.length < 2 && !complete ? 'hold' : rest[1] === '=' ? 'pass' : 'suspicious'
    if (next === '.') return rest.length < 2 && !complete ? 'hold' : /[A-Za-z_]/.test(rest[1] ?? '') ? 'pass' : 'suspicious'
    if (next === ' ' || next === '\t') {
      const after = rest.trimStart()[0]
      if (after === undefined) return complete ? 'pass' : 'hold'
      return /[A-Za-z0-9'"]/.test(after) ? 'suspicious' : 'pass'
    }
    if (next === ':' || next === ',' || next === '?') return 'suspicious'
    return 'pass'
  }
}

/** A whole column-0 line that started like prose: is it (English) prose rather than Python? */
export function isProse(line: string): boolean {
  const tokens = line.trim().split(/\s+/)
  const plain = (t: string) => PLAIN_WORD.test(t) && !KEYWORDS.has(t.replace(/[,.;:!?]+$/, ''))
  // Assignments and subscripts are code; prose may still contain (parentheses).
  const codeLike = /=|\[|\{/.test(line)
  if (!codeLike) for (let i = 0; i + 1 < tokens.length; i++) if (plain(tokens[i]!) && plain(tokens[i + 1]!)) return true
  const first = tokens[0]!.replace(/[,.;:!?]+$/, '')
  if (/[A-Za-z][.!?:]$/.test(line.trim()) && !KEYWORDS.has(first) && !/[()[\]=]/.test(line)) return true
  if (/^\d+[.)]\s+[A-Za-z]/.test(line) || /^[*\->]\s+[A-Za-z]/.test(line)) return !/[()=]/.test(line)
  return /[A-Za-z][’'][a-z]/.test(line) && (line.split(/['’]/).length - 1) % 2 === 1
}
