// The client's SSE parser (clients/typescript/src/sse.ts): the same stream cut at every position
// (including between \r and \n) gives the same messages; comments, multi-line data, ids, retry.
// And an EventStream that cannot be reopened ends at a cut with a clear error.
import t from 'tap'
import { isDeepStrictEqual } from 'node:util'
import { ConnectionError, EventStream, SseParser, type SseMessage } from '../../clients/typescript/src/index.ts'

const STREAM =
  ': heartbeat\n\n' +
  'event: status\nid: 1-0\ndata: {"type":"status"}\n\n' +
  'event: stdout\r\nid: 1-1\r\ndata: {"type":"stdout",\r\ndata: "text":"a:b"}\r\n\r\n' +
  'event: shutdown\rdata: bye\rretry: 1000\r\r' +
  'data:no-space\n\n' +
  'id: 2-0\nevent: done\ndata: {}\n'

const EXPECTED: SseMessage[] = [
  { event: 'status', id: '1-0', data: '{"type":"status"}' },
  { event: 'stdout', id: '1-1', data: '{"type":"stdout",\n"text":"a:b"}' },
  { event: 'shutdown', id: '', data: 'bye', retry: 1000 },
  { event: 'message', id: '', data: 'no-space' },
]

t.test('whole, the stream gives its messages; an unfinished last one is held back', async (t) => {
  t.same(new SseParser().push(STREAM), EXPECTED)
})

t.test('cut in two at every position, it gives the same messages', async (t) => {
  for (let i = 0; i <= STREAM.length; i++) {
    const p = new SseParser()
    const got = [...p.push(STREAM.slice(0, i)), ...p.push(STREAM.slice(i))]
    if (!isDeepStrictEqual(got, EXPECTED)) t.fail(`cut at ${i}: ${JSON.stringify(got)}`)
  }
  t.pass('every cut')
})

t.test('fed one character at a time, the last message completes with its blank line', async (t) => {
  const p = new SseParser()
  const got: SseMessage[] = []
  for (const c of STREAM + '\n') got.push(...p.push(c))
  t.same(got, [...EXPECTED, { event: 'done', id: '2-0', data: '{}' }])
})

t.test('a stream that cannot be resumed (a one-shot: no way to reopen it) throws ConnectionError at a cut, at once', async (t) => {
  const cut = new Response('event: status\nid: 1-0\ndata: {"type":"status"}\n\n', { headers: { 'content-type': 'text/event-stream' } })
  let reconnects = 0
  const stream = new EventStream(null, cut, { onReconnect: () => (reconnects += 1) })
  const seen: string[] = []
  const err = await (async () => {
    for await (const e of stream) seen.push(e.type)
  })().catch((e: unknown) => e)
  t.same(seen, ['status'], 'the events before the cut')
  t.type(err, ConnectionError)
  t.match((err as Error).message, /cannot be resumed/)
  t.equal(reconnects, 0, 'no reconnection is attempted')
})
