// ReplClient over an in-memory transport: the ready handshake, request/reply with timeouts,
// close semantics, execution routing by exec_id, a parser that survives bad input, llm_request
// hand-off, and decoding that does not depend on how the bytes were chunked.
import t from 'tap'
import { mock } from 'node:test'
import type { Logger } from 'pino'
import { ReplClient, ReplClosedError, ReplRequestError, ReplTimeoutError } from '../../src/repl/repl-client.js'
import type { LlmRequestFrame, ReplFrame } from '../../src/repl/protocol.js'
import { memoryTransportPair, type FakeRepl, type MemoryTransport } from '../helpers/memory-transport.js'

interface Warning {
  obj: Record<string, unknown>
  msg: string
}

function recordingLogger(): { log: Logger; warnings: Warning[] } {
  const warnings: Warning[] = []
  const log = {
    warn: (obj: Record<string, unknown>, msg: string) => {
      warnings.push({ obj, msg })
    },
  } as unknown as Logger
  return { log, warnings }
}

interface Harness {
  client: ReplClient
  repl: FakeRepl
  transport: MemoryTransport
  warnings: Warning[]
}

function connect(opts: { readyTimeoutMs?: number; expectReady?: boolean } = {}): Harness {
  const { transport, repl } = memoryTransportPair()
  const { log, warnings } = recordingLogger()
  const client = new ReplClient(transport, log, { readyTimeoutMs: opts.readyTimeoutMs ?? 60_000, expectReady: opts.expectReady ?? false })
  return { client, repl, transport, warnings }
}

/** The `text` of each frame, for compact assertions on what a sink received. */
const texts = (frames: ReplFrame[]): unknown[] => frames.map((f) => f.text)

/** Lets already-settled promises run their callbacks (no timers involved). */
const flush = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))

/** Tracks whether a promise settled, without awaiting it. */
function watch<T>(p: Promise<T>): { settled: () => boolean } {
  let done = false
  p.then(
    () => {
      done = true
    },
    () => {
      done = true
    },
  )
  return { settled: () => done }
}

/** Fake setTimeout for one test: ReplClient's timers fire only when the test ticks the clock. */
function fakeTimers(t: { teardown: (fn: () => void) => void }): void {
  mock.timers.enable({ apis: ['setTimeout'] })
  t.teardown(() => mock.timers.reset())
}

t.test('the ready handshake', async (t) => {
  t.test('ready resolves with the ready frame, and not before it arrives', async (t) => {
    const { client, repl } = connect({ expectReady: true })
    const w = watch(client.ready)
    await flush()
    t.notOk(w.settled(), 'still waiting for the REPL')
    repl.ready({ python: '3.12' })
    const frame = await client.ready
    t.match(frame, { v: 1, type: 'ready', python: '3.12' })
  })

  t.test('ready rejects with ReplTimeoutError when the REPL stays silent past readyTimeoutMs', async (t) => {
    fakeTimers(t)
    const { client, repl } = connect({ expectReady: true, readyTimeoutMs: 500 })
    const w = watch(client.ready)
    mock.timers.tick(499)
    await flush()
    t.notOk(w.settled(), 'no timeout before readyTimeoutMs')
    mock.timers.tick(1)
    await t.rejects(client.ready, ReplTimeoutError)
    t.doesNotThrow(() => repl.ready(), 'a ready frame after the timeout is harmless')
  })

  t.test('a ready frame in time cancels the ready timeout', async (t) => {
    fakeTimers(t)
    const { client, repl } = connect({ expectReady: true, readyTimeoutMs: 500 })
    repl.ready()
    mock.timers.tick(10_000)
    t.match(await client.ready, { type: 'ready' })
  })

  t.test('ready rejects with ReplClosedError when the channel closes first', async (t) => {
    const { client, repl } = connect({ expectReady: true })
    repl.close(new Error('attach stream reset'))
    const err = await client.ready.then(
      () => null,
      (e: unknown) => e,
    )
    t.type(err, ReplClosedError)
    t.match((err as Error).message, /attach stream reset/, 'the cause is kept in the message')
  })

  t.test('a client adopting a running REPL (expectReady: false) is ready at once', async (t) => {
    const { client, repl } = connect({ expectReady: false })
    t.match(await client.ready, { type: 'ready' })
    t.same(repl.lines, [], 'nothing is sent for it')
  })
})

t.test('requests and replies', async (t) => {
  t.test('each request is one frame on the wire carrying its type and fields', async (t) => {
    const { client, repl } = connect()
    const p = client.request('inspect', { name: 'x', depth: 2 }, 60_000)
    const f = await repl.nextFrame()
    t.match(f, { v: 1, type: 'inspect', name: 'x', depth: 2, id: String })
    repl.reply(f.id!, { value: 42 })
    t.match(await p, { type: 'reply', reply_to: f.id, ok: true, value: 42 })
  })

  t.test('every request gets a unique id and resolves with its own reply, whatever the reply order', async (t) => {
    const { client, repl } = connect()
    const n = 25
    const results = Array.from({ length: n }, (_, i) => client.request('ping', { n: i }, 60_000))
    t.equal(repl.frames.length, n)
    const ids = repl.frames.map((f) => f.id)
    t.equal(new Set(ids).size, n, 'ids are unique')
    t.ok(
      ids.every((id) => typeof id === 'string' && id.length > 0),
      'ids are non-empty strings',
    )
    for (const f of [...repl.frames].reverse()) repl.reply(f.id!, { echo: f.n })
    const replies = await Promise.all(results)
    replies.forEach((r, i) => {
      t.equal(r.echo, i, `request ${i} got its own reply`)
      t.equal(r.reply_to, ids[i])
    })
  })

  t.test('an ok:false reply rejects with ReplRequestError carrying the code and message', async (t) => {
    const { client, repl } = connect()
    const p = client.request('restore', {}, 60_000)
    const f = await repl.nextFrame('restore')
    repl.reply(f.id!, { ok: false, error: { code: 'busy', message: 'an execution is running' } })
    const err = await p.then(
      () => null,
      (e: unknown) => e,
    )
    t.type(err, ReplRequestError)
    t.equal((err as ReplRequestError).code, 'busy')
    t.equal((err as ReplRequestError).message, 'an execution is running')
  })

  t.test('an ok:false reply without error details still rejects, with code repl_error', async (t) => {
    const { client, repl } = connect()
    const p = client.request('restore', {}, 60_000)
    const f = await repl.nextFrame()
    repl.reply(f.id!, { ok: false })
    await t.rejects(p, new ReplRequestError('repl_error', 'request failed'))
    t.equal(await p.catch((e: ReplRequestError) => e.code), 'repl_error')
  })

  t.test('a request times out with ReplTimeoutError, and its late reply is ignored', async (t) => {
    fakeTimers(t)
    const { client, repl } = connect()
    const slow = client.request('slow', {}, 1000)
    const w = watch(slow)
    const slowId = (await repl.nextFrame('slow')).id!
    mock.timers.tick(999)
    await flush()
    t.notOk(w.settled(), 'not timed out before its timeout')
    mock.timers.tick(1)
    await t.rejects(slow, ReplTimeoutError)
    await t.rejects(slow, { message: /slow/ }, 'the error names the request')
    t.equal(
      (client as unknown as { pending: Map<string, unknown> }).pending.size,
      0,
      'a timed-out request is forgotten, not kept until a reply that may never come',
    )

    const next = client.request('next', {}, 1000)
    const nextId = (await repl.nextFrame('next')).id!
    t.doesNotThrow(() => repl.reply(slowId, { value: 'late' }), 'a late reply does not throw')
    const nw = watch(next)
    await flush()
    t.notOk(nw.settled(), 'the late reply settles no other request')
    repl.reply(nextId, { value: 'fresh' })
    t.match(await next, { value: 'fresh' })
  })

  t.test('a reply for an id never sent is ignored', async (t) => {
    const { client, repl } = connect()
    const p = client.request('ping', {}, 60_000)
    const w = watch(p)
    repl.reply('no-such-request')
    await flush()
    t.notOk(w.settled())
    repl.reply((await repl.nextFrame()).id!)
    t.match(await p, { type: 'reply' })
  })
})

t.test('closing the channel', async (t) => {
  t.test('pending requests fail with ReplClosedError when the channel closes', async (t) => {
    fakeTimers(t)
    const { client, repl } = connect()
    const a = client.request('a', {}, 1000)
    const b = client.request('b', {}, 5000)
    const closes: Array<Error | undefined> = []
    client.onClose((e) => closes.push(e))
    repl.close(new Error('EPIPE'))
    await t.rejects(a, ReplClosedError)
    await t.rejects(b, { name: 'ReplClosedError', message: /EPIPE/ })
    t.equal(closes.length, 1, 'onClose callbacks run once')
    t.type(closes[0], ReplClosedError)
    mock.timers.tick(10_000) // the cleared timeouts must not fire on settled requests
  })

  t.test('requests after the close reject at once and write nothing', async (t) => {
    const { client, repl } = connect()
    repl.close()
    const before = repl.lines.length
    await t.rejects(client.request('ping', {}, 60_000), ReplClosedError)
    client.interrupt()
    client.sendLlmResponse('x', { text: 'late' })
    t.equal(repl.lines.length, before, 'nothing reaches the wire')
    let late: Error | undefined
    client.onClose((e) => {
      late = e
    })
    t.type(late, ReplClosedError, 'onClose after the close is called immediately')
  })

  t.test('close() from the host side closes the REPL end and fails pending requests', async (t) => {
    const { client, repl } = connect()
    const p = client.request('ping', {}, 60_000)
    client.close()
    t.ok(repl.closed, 'the REPL side sees the close')
    await t.rejects(p, ReplClosedError)
  })

  t.test('a transport that reports its close twice fails things only once', async (t) => {
    const { transport } = memoryTransportPair()
    const closeCbs: Array<(err?: Error) => void> = []
    const twice = {
      write: (d: string) => transport.write(d),
      onData: (cb: (c: Buffer) => void) => transport.onData(cb),
      onClose: (cb: (err?: Error) => void) => {
        closeCbs.push(cb)
      },
      close: () => {},
    }
    const client = new ReplClient(twice, recordingLogger().log, { readyTimeoutMs: 60_000, expectReady: false })
    const p = client.request('ping', {}, 60_000)
    const closes: Error[] = []
    client.onClose((e) => {
      if (e) closes.push(e)
    })
    closeCbs.forEach((cb) => cb(new Error('first')))
    closeCbs.forEach((cb) => cb(new Error('second')))
    t.equal(closes.length, 1, 'onClose callbacks run once')
    await t.rejects(p, { message: /first/ })
    await t.rejects(client.request('ping', {}, 60_000), { message: /first/ }, 'the first close is the one remembered')
  })
})

t.test('execution frames are routed by exec_id', async (t) => {
  t.test('each execution gets its own frames, and done ends the routing', async (t) => {
    const { client, repl } = connect()
    const a: ReplFrame[] = []
    const b: ReplFrame[] = []
    client.execute('exec-a', 'print(1)', (f) => a.push(f), { timeout_s: 5 })
    client.execute('exec-b', 'print(2)', (f) => b.push(f))
    t.match(repl.frames, [
      { type: 'execute', id: 'exec-a', code: 'print(1)', timeout_s: 5 },
      { type: 'execute', id: 'exec-b', code: 'print(2)' },
    ])

    repl.send({ type: 'stdout', exec_id: 'exec-a', text: 'a1' })
    repl.send({ type: 'stdout', exec_id: 'exec-b', text: 'b1' })
    repl.send({ type: 'done', exec_id: 'exec-a', status: 'ok' })
    repl.send({ type: 'stdout', exec_id: 'exec-a', text: 'after done' })
    repl.send({ type: 'stderr', exec_id: 'exec-b', text: 'b2' })
    repl.send({ type: 'done', exec_id: 'exec-b', status: 'error' })
    repl.send({ type: 'stdout', exec_id: 'exec-b', text: 'after done' })

    t.same(
      a.map((f) => [f.type, f.text ?? f.status]),
      [
        ['stdout', 'a1'],
        ['done', 'ok'],
      ],
    )
    t.same(
      b.map((f) => [f.type, f.text ?? f.status]),
      [
        ['stdout', 'b1'],
        ['stderr', 'b2'],
        ['done', 'error'],
      ],
    )
  })

  t.test('frames for unknown exec_ids and frames without exec_id are dropped', async (t) => {
    const { client, repl } = connect()
    const got: ReplFrame[] = []
    client.execute('mine', 'x', (f) => got.push(f))
    repl.send({ type: 'stdout', exec_id: 'someone-else', text: 'no' })
    repl.send({ type: 'stdout', exec_id: null, text: 'stray thread' })
    repl.send({ type: 'stdout', text: 'no exec_id at all' })
    repl.send({ type: 'stdout', exec_id: 7, text: 'not a string' })
    repl.send({ type: 'done', exec_id: 'someone-else' })
    repl.send({ type: 'stdout', exec_id: 'mine', text: 'yes' })
    t.same(texts(got), ['yes'])
  })

  t.test('a streamed execution is routed like a plain one', async (t) => {
    const { client, repl } = connect()
    const got: ReplFrame[] = []
    client.streamBegin('s1', (f) => got.push(f), { timeout_s: 3 })
    client.streamChunk('s1', 'print(')
    client.streamChunk('s1', '1)')
    client.streamEnd('s1')
    t.match(repl.frames, [
      { type: 'exec_stream_begin', id: 's1', timeout_s: 3 },
      { type: 'exec_stream_chunk', id: 's1', text: 'print(' },
      { type: 'exec_stream_chunk', id: 's1', text: '1)' },
      { type: 'exec_stream_end', id: 's1' },
    ])
    repl.send({ type: 'stdout', exec_id: 's1', text: '1\n' })
    repl.send({ type: 'done', exec_id: 's1' })
    t.same(
      got.map((f) => f.type),
      ['stdout', 'done'],
    )
  })

  t.test('track() routes an execution already running; forget() stops the routing', async (t) => {
    const { client, repl } = connect()
    const got: ReplFrame[] = []
    client.track('adopted', (f) => got.push(f))
    t.equal(repl.lines.length, 0, 'tracking sends nothing')
    repl.send({ type: 'stdout', exec_id: 'adopted', text: 'one' })
    client.forget('adopted')
    repl.send({ type: 'stdout', exec_id: 'adopted', text: 'two' })
    t.same(texts(got), ['one'])
  })

  t.test('interrupt is a fire-and-forget frame with its own id', async (t) => {
    const { client, repl } = connect()
    client.interrupt()
    client.interrupt()
    t.match(repl.frames, [
      { type: 'interrupt', id: String },
      { type: 'interrupt', id: String },
    ])
    t.not(repl.frames[0]!.id, repl.frames[1]!.id)
  })
})

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
