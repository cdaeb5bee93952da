// ReplClient over an in-memory transport: the ready handshake, request/reply with timeouts,
// close semantics and execution routing by exec_id (repl-client-frames.test.ts has the rest).
import t from 'tap'
import { mock } from 'node:test'
import { ReplClient, ReplClosedError, ReplRequestError, ReplTimeoutError } from '../../src/repl/repl-client.js'
import type { ReplFrame } from '../../src/repl/protocol.js'
import { memoryTransportPair } from '../helpers/memory-transport.js'
import { connect, fakeTimers, flush, recordingLogger, texts, watch } from '../helpers/repl-harness.js'

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
