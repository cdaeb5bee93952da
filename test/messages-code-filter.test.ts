// Unit tests of the filter that keeps fences and prose out of the REPL, fed token by token.
import t from 'tap'
import { CodeFilter, isProse } from '../src/agent/code-filter.js'

function run(reply: string, size = 3): { code: string; dropped: string[] } {
  const f = new CodeFilter()
  let code = ''
  for (let i = 0; i < reply.length; i += size) code += f.push(reply.slice(i, i + size))
  code += f.end()
  return { code, dropped: f.dropped }
}

t.test('plain code passes unchanged, whatever the token size', async (t) => {
  const src = 'import time\nx = 1\nif x:\n    print("yes")\nelse:\n    pass\nfor i in range(2): print(i)\nprint(f"{x!r}")\nx != 2\na if x else b\n'
  for (const size of [1, 2, 5, 100]) t.equal(run(src, size).code, src, `token size ${size}`)
})

t.test('fences and the prose around them are dropped', async (t) => {
  const r = run('Here is the code:\n```python\nprint(1)\n```\nThat prints 1.\n```\nprint(2)\n```\nDone!')
  t.equal(r.code, 'print(1)\nprint(2)\n')
  t.equal(r.dropped.length, 6)
})

t.test('a stray prose line between statements is dropped', async (t) => {
  t.equal(run('print(1)\nNow let me compute the total.\ntotal = 3\nSure!\nprint(total)\n').code, 'print(1)\ntotal = 3\nprint(total)\n')
})

t.test('strings and brackets spanning lines are never judged as prose', async (t) => {
  const src = 'text = """\nHello there my friend.\nHow are you today?\n"""\nitems = [\n  this is not judged,\n]\n'
  t.equal(run(src).code, src)
})

t.test('code is released as soon as its line start is decided', async (t) => {
  const f = new CodeFilter()
  t.equal(f.push('print("a")\npr'), 'print("a")\n', 'a bare word waits: it may be prose')
  t.equal(f.push('int('), 'print(')
  t.equal(f.push('"b")\n'), '"b")\n')
})

t.test('isProse', async (t) => {
  for (const s of ['Here is the code:', 'I will compute this now.', 'Sure!', 'Let me check', '1. First compute the sum', '- a bullet point here'])
    t.ok(isProse(s), s)
  for (const s of ['x is None and print(x)', 'a if b else c', 'foo: int = 3', 'x, y = 1, 2', 'print "x"']) t.notOk(isProse(s), s)
})
