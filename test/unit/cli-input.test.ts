// The console's multi-line input (clients/typescript/src/cli/input.ts): what waits for more lines,
// and what runs, the way Python's own console decides.
import t from 'tap'
import { InputBuffer } from '../../clients/typescript/src/cli/input.ts'

/** Feeds lines; returns the sources that ran, in order, and whether lines are still pending. */
function feed(lines: string[]): { ran: string[]; pending: boolean } {
  const b = new InputBuffer()
  const ran = lines.flatMap((l) => b.feed(l))
  return { ran, pending: b.pending }
}

t.test('a simple statement runs at once; blank lines alone do nothing', async (t) => {
  t.same(feed(['', 'x = 1', '  ']), { ran: ['x = 1'], pending: false })
})

t.test('open brackets, triple quotes and a trailing backslash wait for more', async (t) => {
  t.same(feed(['f(1,', '  2)']), { ran: ['f(1,\n  2)'], pending: false })
  t.same(feed(['s = """a', 'b: (', '"""']), { ran: ['s = """a\nb: (\n"""'], pending: false })
  t.same(feed(['x = 1 + \\', '2']), { ran: ['x = 1 + \\\n2'], pending: false })
  t.same(feed(['d = {"a": [1,']), { ran: [], pending: true })
})

t.test('brackets and colons inside strings and comments do not count', async (t) => {
  t.same(feed(['print("(: [")']), { ran: ['print("(: [")'], pending: false })
  t.same(feed(['x = 1  # note: (']), { ran: ['x = 1  # note: ('], pending: false })
  t.same(feed(['d = {"k": 1}']), { ran: ['d = {"k": 1}'], pending: false })
})

t.test('a block runs after an empty line, or when an unindented line follows it', async (t) => {
  t.same(feed(['def f(a):', '    return a', '']), { ran: ['def f(a):\n    return a'], pending: false })
  t.same(feed(['for i in x:', '    y(i)', 'z = 1']), { ran: ['for i in x:\n    y(i)', 'z = 1'], pending: false })
  t.same(feed(['if a:', '    b()', 'else:', '    c()']), { ran: [], pending: true }, 'else carries the block on')
  t.same(feed(['try:', '    b()', 'except E:  # comment', '    c()', '']), { ran: ['try:\n    b()\nexcept E:  # comment\n    c()'], pending: false })
})
