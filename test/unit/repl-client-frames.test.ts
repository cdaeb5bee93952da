// ReplClient over an in-memory transport, part two: a parser that survives bad input, llm_request
// hand-off, and decoding that does not depend on how the bytes were chunked.
import t from 'tap'
import type { LlmRequestFrame, ReplFrame } from '../../src/repl/protocol.js'
import { connect, texts } from '../helpers/repl-harness.js'
import { waitFor } from '../helpers/wait.js'

t.test('a defensive parser', async (t) => {
  t.test('invalid JSON lines and non-object frames are dropped without throwing', async (t) => {
    const { client, repl, warnings } = connect()
    const got: ReplFrame[] = []
    client.execute('e', 'x', (f) => got.push(f))
    const bad = [
      'not json',
      '{"type":"stdout","exec_id":"e"',
      '[1,2,3]',
      '42',
      'null',
      '"a string"',
      'true',
      '{"exec_id":"e","text":"no type"}',
      '{"type":5,"exec_id":"e"}',
      '[{"type":"stdout","exec_id":"e"}]',
    ]
    for (const line of bad) t.doesNotThrow(() => repl.sendRaw(line + '\n'), `survives ${line}`)
    t.doesNotThrow(() => repl.sendRaw(Buffer.from([0xff, 0xfe, 0x7b, 0x0a])), 'survives invalid UTF-8')
    t.equal(warnings.filter((w) => w.msg === 'repl: invalid frame dropped').length, bad.length + 1, 'each bad line is logged')
    t.same(got, [], 'none of them reached the execution')
    repl.send({ type: 'stdout', exec_id: 'e', text: 'still fine' })
    t.same(texts(got), ['still fine'], 'the next valid frame is delivered')
  })

  t.test('blank lines are skipped silently', async (t) => {
    const { client, repl, warnings } = connect()
    const got: ReplFrame[] = []
    client.execute('e', 'x', (f) => got.push(f))
    repl.sendRaw('\n\n   \n\r\n')
    repl.sendRaw('{"v":1,"type":"stdout","exec_id":"e","text":"crlf"}\r\n')
    t.same(warnings, [])
    t.same(texts(got), ['crlf'])
  })

  t.test('an oversized line is dropped and logged, and the next frame still arrives', async (t) => {
    const { client, repl, warnings } = connect()
    const got: ReplFrame[] = []
    client.execute('e', 'x', (f) => got.push(f))
    const huge = Buffer.alloc(16 * 1024 * 1024 + 1, 0x61)
    repl.sendRaw(huge.subarray(0, 1 << 20))
    repl.sendRaw(Buffer.concat([huge.subarray(1 << 20), Buffer.from('\n')]))
    repl.send({ type: 'stdout', exec_id: 'e', text: 'after' })
    // 16 MiB are handled a share per turn of the event loop (fair-input.ts): the frame comes some turns later.
    t.ok(await waitFor(() => got.length > 0, 10_000), 'the frame after it arrives')
    t.match(warnings, [{ msg: 'repl: oversized frame dropped', obj: { bytes: huge.length } }])
    t.same(texts(got), ['after'])
  })

  t.test('a gap in seq is logged but the frame is still delivered', async (t) => {
    const { client, repl, warnings } = connect()
    const got: ReplFrame[] = []
    client.execute('e', 'x', (f) => got.push(f))
    repl.send({ type: 'stdout', exec_id: 'e', text: '0', seq: 0 })
    repl.send({ type: 'stdout', exec_id: 'e', text: '1', seq: 1 })
    repl.send({ type: 'stdout', exec_id: 'e', text: '5', seq: 5 })
    t.match(warnings, [{ msg: 'repl: seq gap', obj: { expected: 2, got: 5 } }])
    t.same(texts(got), ['0', '1', '5'])
  })

  t.test('a protocol_error frame is logged and routed nowhere', async (t) => {
    const { client, repl, warnings } = connect()
    const got: ReplFrame[] = []
    client.execute('e', 'x', (f) => got.push(f))
    repl.send({ type: 'protocol_error', exec_id: 'e', detail: 'bad frame' })
    t.match(warnings, [{ msg: 'repl: reports a protocol error', obj: { detail: 'bad frame' } }])
    t.same(got, [])
  })
})

t.test('llm_request frames', async (t) => {
  t.test('reach the handler, and the execution sink too', async (t) => {
    const { client, repl } = connect()
    const handled: LlmRequestFrame[] = []
    const sink: ReplFrame[] = []
    client.onLlmRequest((f) => handled.push(f))
    client.execute('e', 'llm_query("hi")', (f) => sink.push(f))
    repl.send({ type: 'llm_request', id: 'q1', exec_id: 'e', prompts: ['hi'], model: null })
    t.match(handled, [{ type: 'llm_request', id: 'q1', exec_id: 'e', prompts: ['hi'] }])
    t.match(sink, [{ type: 'llm_request', id: 'q1' }])
    client.sendLlmResponse('q1', { text: 'hello' })
    t.match(repl.frames.at(-1), { type: 'llm_response', reply_to: 'q1', text: 'hello', id: String })
    t.not(repl.frames.at(-1)!.id, 'q1', 'the response has its own id')
  })

  t.test('without a handler, an error llm_response is written back', async (t) => {
    const { repl } = connect()
    const before = repl.frames.length
    repl.send({ type: 'llm_request', id: 'q2', exec_id: 'e', prompts: ['hi'] })
    t.equal(repl.frames.length, before + 1)
    t.match(repl.frames.at(-1), { type: 'llm_response', reply_to: 'q2', error: /no LLM/ })
    t.notOk('text' in repl.frames.at(-1)!, 'no text in an error response')
  })
})

t.test('decoding does not depend on chunking', async (t) => {
  // One session's worth of REPL output: a reply, two executions' frames with multi-byte text,
  // an llm_request, a bad line and a blank line in between.
  const transcript = (replyTo: string): Buffer =>
    Buffer.from(
      [
        { v: 1, seq: 0, type: 'stdout', exec_id: 'e1', text: 'héllo wörld ✓\n' },
        { v: 1, seq: 1, type: 'reply', reply_to: replyTo, exec_id: null, ok: true, vars: ['x', 'ÿ'] },
        { v: 1, seq: 2, type: 'stderr', exec_id: 'e2', text: '🚀 liftoff — 日本語' },
        { v: 1, seq: 3, type: 'llm_request', id: 'q', exec_id: 'e1', prompts: ['¿qué?'] },
      ]
        .map((f) => JSON.stringify(f))
        .join('\n') +
        '\nnot json\n\n' +
        JSON.stringify({ v: 1, seq: 4, type: 'done', exec_id: 'e1', status: 'ok' }) +
        '\n' +
        JSON.stringify({ v: 1, seq: 5, type: 'done', exec_id: 'e2', status: 'ok' }) +
        '\n',
    )

  /** Runs one client over the transcript cut into the given chunks; returns everything it observed. */
  async function observe(cuts: (b: Buffer) => Buffer[]): Promise<unknown[]> {
    const { client, repl, warnings } = connect()
    const seen: unknown[] = []
    client.onLlmRequest((f) => seen.push(['llm', f]))
    client.execute('e1', 'a', (f) => seen.push(['e1', f]))
    client.execute('e2', 'b', (f) => seen.push(['e2', f]))
    const reply = client.request('vars', {}, 60_000).then((f) => seen.push(['reply', { ...f, reply_to: 'ID' }]))
    const id = (await repl.nextFrame('vars')).id!
    for (const chunk of cuts(transcript(id))) repl.sendRaw(chunk)
    await reply
    seen.push(['warnings', warnings.map((w) => w.msg)])
    return seen
  }

  const whole = await observe((b) => [b])
  t.equal(whole.length, 8, 'the reference run saw 6 routed frames, the llm hand-off and the warnings')
  t.match(whole, [
    ['e1', { text: 'héllo wörld ✓\n' }],
    ['e2', { text: '🚀 liftoff — 日本語' }],
    ['llm', { prompts: ['¿qué?'] }],
    ['e1', { type: 'llm_request' }],
    ['e1', { type: 'done' }],
    ['e2', { type: 'done' }],
    ['reply', { vars: ['x', 'ÿ'] }],
    ['warnings', ['repl: invalid frame dropped']],
  ])

  const size = transcript('00000000-0000-0000-0000-000000000000').length
  let mismatches = 0
  for (let at = 0; at <= size; at++) {
    const got = await observe((b) => [b.subarray(0, at), b.subarray(at)])
    if (JSON.stringify(got) !== JSON.stringify(whole)) {
      mismatches++
      t.same(got, whole, `cut at byte ${at}`)
    }
  }
  t.equal(mismatches, 0, `a cut at each of ${size + 1} byte offsets decodes identically`)

  const bytewise = await observe((b) => Array.from(b, (byte) => Buffer.from([byte])))
  t.same(bytewise, whole, 'one byte per chunk decodes identically')

  const threeWay = await observe((b) => [b.subarray(0, 7), b.subarray(7, 8), b.subarray(8, 200), b.subarray(200, 201), b.subarray(201)])
  t.same(threeWay, whole, 'uneven chunks decode identically')
})
