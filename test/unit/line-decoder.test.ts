// LineDecoder: bytes in, whole lines out, however the bytes were chunked; a line over the limit
// is dropped whole and reported once, without disturbing the lines around it; given a budget, it
// takes no more of a chunk than the budget allows.
import t from 'tap'
import { LINE_COST_BYTES, LineDecoder } from '../../src/repl/line-decoder.js'

interface Run {
  lines: string[]
  oversize: number[]
}

/** Feeds the chunks to a fresh decoder and returns what it emitted. */
function decode(chunks: Array<Buffer | string>, maxLine = 1024): Run {
  const run: Run = { lines: [], oversize: [] }
  const d = new LineDecoder(
    maxLine,
    (l) => run.lines.push(l),
    (n) => run.oversize.push(n),
  )
  for (const c of chunks) d.push(typeof c === 'string' ? Buffer.from(c) : c)
  return run
}

/** Every way of cutting `b` in two, plus one byte per chunk. */
function cuttings(b: Buffer): Array<{ name: string; chunks: Buffer[] }> {
  const out: Array<{ name: string; chunks: Buffer[] }> = [{ name: 'one byte per chunk', chunks: Array.from(b, (x) => Buffer.from([x])) }]
  for (let at = 0; at <= b.length; at++) out.push({ name: `cut at byte ${at}`, chunks: [b.subarray(0, at), b.subarray(at)] })
  return out
}

t.test('a stream of lines cut at every byte offset yields the same lines', async (t) => {
  const lines = ['{"type":"stdout","text":"a"}', 'second line', 'x', '{"type":"done"}']
  const bytes = Buffer.from(lines.join('\n') + '\n')
  t.same(decode([bytes]).lines, lines, 'the whole stream at once')
  let bad = 0
  for (const { name, chunks } of cuttings(bytes)) {
    const got = decode(chunks)
    if (JSON.stringify(got) !== JSON.stringify({ lines, oversize: [] })) {
      bad++
      t.same(got, { lines, oversize: [] }, name)
    }
  }
  t.equal(bad, 0, `all ${bytes.length + 2} cuttings agree`)
})

t.test('multi-byte UTF-8 characters split across chunks decode correctly', async (t) => {
  const lines = ['é', 'naïve café', '✓ done', '🚀🚀', '日本語のテキスト', 'mixed: ñ€𝄞']
  const bytes = Buffer.from(lines.join('\n') + '\n')
  t.ok(bytes.length > lines.join('\n').length + 1, 'the input really has multi-byte characters')
  let bad = 0
  for (const { name, chunks } of cuttings(bytes)) {
    const got = decode(chunks).lines
    if (JSON.stringify(got) !== JSON.stringify(lines)) {
      bad++
      t.same(got, lines, name)
    }
  }
  t.equal(bad, 0, 'no cutting produces replacement characters or broken lines')
  // Three-way cuts inside the 4-byte emoji specifically.
  const emoji = Buffer.from('🚀\n')
  t.equal(emoji.length, 5)
  for (let i = 1; i < 4; i++)
    for (let j = i + 1; j <= 4; j++) {
      t.same(decode([emoji.subarray(0, i), emoji.subarray(i, j), emoji.subarray(j)]).lines, ['🚀'], `emoji cut at ${i} and ${j}`)
    }
})

t.test('nothing is emitted until the newline arrives', async (t) => {
  const run: string[] = []
  const d = new LineDecoder(
    100,
    (l) => run.push(l),
    () => t.fail('no oversize'),
  )
  d.push(Buffer.from('partial'))
  d.push(Buffer.from(' still partial'))
  t.same(run, [])
  d.push(Buffer.from('\n'))
  t.same(run, ['partial still partial'])
})

t.test('a line over the limit is dropped whole and reported once with its size', async (t) => {
  const max = 64
  const big = 'B'.repeat(200)
  const stream = Buffer.from(`before\n${big}\nafter\n${'ok'.repeat(10)}\n`)
  const expected = { lines: ['before', 'after', 'ok'.repeat(10)], oversize: [200] }
  t.same(decode([stream], max), expected, 'in one chunk')
  let bad = 0
  for (const { name, chunks } of cuttings(stream)) {
    const got = decode(chunks, max)
    if (JSON.stringify(got) !== JSON.stringify(expected)) {
      bad++
      t.same(got, expected, name)
    }
  }
  t.equal(bad, 0, 'every cutting drops the same line and reports the same size once')
})

t.test('the limit is inclusive: a line of exactly maxLine bytes passes, one more byte is dropped', async (t) => {
  t.same(decode(['a'.repeat(10) + '\n'], 10), { lines: ['a'.repeat(10)], oversize: [] })
  t.same(decode(['a'.repeat(11) + '\n'], 10), { lines: [], oversize: [11] })
  t.same(decode(['é'.repeat(5) + '\n'], 10), { lines: ['é'.repeat(5)], oversize: [] }, 'the limit counts bytes: 5 × é is 10 bytes')
  t.same(decode(['é'.repeat(5) + 'x\n'], 10), { lines: [], oversize: [11] })
})

t.test('an oversized line arriving in many chunks keeps no more than the limit in memory and is reported once', async (t) => {
  const oversize: number[] = []
  const lines: string[] = []
  const d = new LineDecoder(
    1000,
    (l) => lines.push(l),
    (n) => oversize.push(n),
  )
  const chunk = Buffer.alloc(4096, 0x78)
  for (let i = 0; i < 256; i++) d.push(chunk) // 1 MiB with no newline
  const internals = d as unknown as { parts: Buffer[] }
  t.equal(internals.parts.length, 0, 'nothing of the oversized line is kept once it is over the limit')
  t.same(oversize, [], 'not reported until the line ends')
  d.push(Buffer.from('tail\nnext\n'))
  t.same(oversize, [256 * 4096 + 4], 'reported once, with the size of the whole line')
  t.same(lines, ['next'])
})

t.test('two oversized lines in a row are reported separately', async (t) => {
  t.same(decode(['x'.repeat(20) + '\n' + 'y'.repeat(30) + '\nz\n'], 10), { lines: ['z'], oversize: [20, 30] })
})

t.test('empty lines are emitted as empty strings', async (t) => {
  t.same(decode(['\n\na\n\n']).lines, ['', '', 'a', ''])
  t.same(decode(['\n', '\n']).lines, ['', ''])
  t.same(decode([Buffer.alloc(0), 'a', Buffer.alloc(0), '\n']).lines, ['a'], 'empty chunks change nothing')
})

t.test('a chunk with many lines yields all of them, in order', async (t) => {
  const lines = Array.from({ length: 5000 }, (_, i) => `{"seq":${i}}`)
  const got = decode([lines.join('\n') + '\n'], 100).lines
  t.equal(got.length, 5000)
  t.same(got, lines)
})

t.test('a trailing partial line is kept for the next chunk, across many lines', async (t) => {
  t.same(decode(['a\nb\nc', 'd\ne', '\n']).lines, ['a', 'b', 'cd', 'e'])
})

t.test('carriage returns and other bytes are passed through untouched', async (t) => {
  t.same(decode(['a\r\n\tb \u0000\n']).lines, ['a\r', '\tb \u0000'])
})

t.test('with a budget it takes lines until the budget is spent, and what it leaves, pushed again, gives the same lines', async (t) => {
  const lines = ['{"type":"stdout","text":"a"}', 'x'.repeat(300), '', 'é✓ done', 'y'.repeat(40)]
  const bytes = Buffer.from(lines.join('\n') + '\n')
  let bad = 0
  for (let budget = 1; budget <= bytes.length + lines.length * LINE_COST_BYTES; budget += 7) {
    const got: string[] = []
    const d = new LineDecoder(
      1024,
      (l) => got.push(l),
      () => t.fail('no oversize'),
    )
    let rest = bytes
    let pushes = 0
    while (rest.length) {
      const before = got.length
      const { taken, cost } = d.push(rest, budget)
      pushes++
      const emitted = got.length - before
      // A push stops once the budget is spent: by its last line, or by its bytes when no line ended.
      const ok = taken > 0 && cost === taken + emitted * LINE_COST_BYTES && (taken === rest.length || cost >= budget)
      if (!ok) {
        bad++
        t.fail(`budget ${budget}: took ${taken} of ${rest.length} bytes for ${cost}, ${emitted} lines`)
        break
      }
      rest = rest.subarray(taken)
    }
    if (JSON.stringify(got) !== JSON.stringify(lines)) {
      bad++
      t.same(got, lines, `budget ${budget} (${pushes} pushes)`)
    }
  }
  t.equal(bad, 0, 'every budget gives the same lines, each push within its budget but for the line that spent it')
  const d = new LineDecoder(
    1024,
    () => undefined,
    () => undefined,
  )
  t.same(d.push(Buffer.from('a\nb\nc\n'), 2), { taken: 2, cost: 2 + LINE_COST_BYTES }, 'a line is handled whole once its newline is taken')
  t.same(d.push(Buffer.from('abcdef'), 4), { taken: 4, cost: 4 }, 'of a line with no newline in the budget, only what the budget allows')
})

t.test('a budget that is not a whole number of bytes still takes whole bytes, at least one', async (t) => {
  const got: string[] = []
  const d = new LineDecoder(
    1024,
    (l) => got.push(l),
    () => undefined,
  )
  let rest = Buffer.from('abc\ndef\n')
  const takes: number[] = []
  while (rest.length) {
    const { taken } = d.push(rest, 0.4)
    takes.push(taken)
    rest = rest.subarray(taken)
  }
  t.same(takes, [1, 1, 1, 1, 1, 1, 1, 1], 'one byte a push')
  t.same(got, ['abc', 'def'])
})
