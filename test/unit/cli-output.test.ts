// How the CLI writes (clients/typescript/src/cli/output.ts): colour and the progress line only on a
// terminal, the progress line wiped before output, output passed through as it comes.
/* eslint-disable no-control-regex -- terminal colour codes start with ESC */
import t from 'tap'
import { EventPrinter, Progress, type Io } from '../../clients/typescript/src/cli/output.ts'
import { waitFor } from '../helpers/wait.js'

function sinks(tty: boolean): Io & { text: () => { out: string; err: string } } {
  const out: string[] = []
  const err: string[] = []
  return {
    out: { isTTY: tty, write: (s: string) => out.push(s) },
    err: { isTTY: tty, write: (s: string) => err.push(s) },
    text: () => ({ out: out.join(''), err: err.join('') }),
  }
}

const ERROR = {
  id: '1-0',
  type: 'error' as const,
  ename: 'ValueError',
  evalue: 'boom',
  traceback: ['Traceback (most recent call last):\n', 'ValueError: boom\n'],
}

t.test('not a terminal: plain text, no progress line', async (t) => {
  const io = sinks(false)
  const progress = new Progress(io)
  const p = new EventPrinter(io, progress)
  progress.start('running')
  p.print({ id: '1-0', type: 'stdout', text: 'a' })
  p.print({ id: '1-1', type: 'stdout', text: 'b\n' })
  p.print({ id: '1-2', type: 'result', data: { 'text/plain': '42' } })
  p.print(ERROR)
  p.print({ id: '1-3', type: 'display', data: { 'image/png': 'iVBORw0KGgo=', 'text/plain': '<Figure>' } })
  // A check that something does not happen needs a wait: longer than the quiet spell after which a terminal shows the line.
  await new Promise((r) => setTimeout(r, 1000))
  progress.stop()
  t.same(io.text(), {
    out: 'ab\n42\n',
    err: 'Traceback (most recent call last):\nValueError: boom\n[image/png image, 0 KiB: not shown in a terminal]\n',
  })
})

t.test('a terminal: the traceback in red, a progress line during a quiet spell, wiped before output', async (t) => {
  const saved = process.env.NO_COLOR
  delete process.env.NO_COLOR
  t.teardown(() => {
    if (saved !== undefined) process.env.NO_COLOR = saved
  })
  const io = sinks(true)
  const progress = new Progress(io)
  const p = new EventPrinter(io, progress)
  progress.start('running')
  t.ok(await waitFor(() => io.text().err.includes('running · ')), 'the progress line appears while nothing is printed')
  p.print({ id: '1-0', type: 'stdout', text: 'out\n' })
  t.match(io.text().err, /running · \d+ s\x1b\[0m\r\x1b\[2K$/, 'and is wiped before the output')
  p.print(ERROR)
  progress.stop()
  t.match(io.text().err, /\x1b\[31mTraceback[\s\S]*ValueError: boom\n\x1b\[0m/)
  t.equal(io.text().out, 'out\n')
})
