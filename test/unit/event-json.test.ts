// eventJson (src/event-json.ts): an output event's JSON with its text escaped once is the JSON of the
// event, whatever the text or the other fields hold, for the event and for the copies made of it;
// the escaped text taken from the REPL's frame line is the one JSON.stringify makes, or is not taken.
import { execFileSync } from 'node:child_process'
import t from 'tap'
import { eventJson, frameTextJson, withTextJson } from '../../src/event-json.js'
import { parseFrame } from '../../src/repl/repl-client.js'
import { frameToEvent } from '../../src/sessions/runner/execution.js'

const texts = [
  '',
  'plain\n',
  'quotes " and \\ backslashes',
  'a NUL \u0000 and "text":"\\u0000" itself',
  'replacement patterns $& $1 $$ $`',
  'unicode é ✓ 🎉 and a lone surrogate \ud800',
  'x'.repeat(300_000),
]

t.test('the JSON is the event as JSON.stringify makes it', async (t) => {
  for (const text of texts) {
    const event = { type: 'stdout', text, seq: 4, pos: 2, note: '"text":"\\u0000"' }
    const json = eventJson(withTextJson({ ...event }))
    t.equal(json, JSON.stringify(event), `text of ${text.length} chars`)
  }
})

t.test('copies of the event carry the escaped text; a field changed in a copy is in its JSON', async (t) => {
  const marked = withTextJson({ type: 'stdout', text: 'hi "there"\n', seq: 1, pos: 7 })
  const { seq: _seq, pos: _pos, ...rest } = { ...marked, id: '1-0' }
  const data = { ...rest, type: 'stdout' }
  t.same(JSON.parse(eventJson(data)), { type: 'stdout', text: 'hi "there"\n', id: '1-0' })
  t.equal(eventJson({ ...marked, seq: 99 }), JSON.stringify({ type: 'stdout', text: 'hi "there"\n', seq: 99, pos: 7 }))
  t.equal(eventJson({ ...marked, text: 'other' }), JSON.stringify({ type: 'stdout', text: 'other', seq: 1, pos: 7 }), 'a copy given another text')
})

/** Stream frames with these texts as the REPL's own encoder (sandbox-image/replcast_repl/channel.py) writes them. */
function replLines(texts: string[]): string[] {
  const script = [
    'import json, sys',
    'from replcast_repl.channel import encode_frame',
    'for i, text in enumerate(json.load(sys.stdin)):',
    '    sys.stdout.write(encode_frame({"v": 1, "type": "stream", "exec_id": "exe_Ab-9_x", "name": "stdout" if i % 2 else "stderr", "text": text, "seq": i}).decode())',
  ].join('\n')
  const out = execFileSync('python3', ['-c', script], {
    input: JSON.stringify(texts),
    env: { ...process.env, PYTHONPATH: 'sandbox-image' },
    maxBuffer: 1 << 26,
  })
  return out.toString('utf8').split('\n').slice(0, -1)
}

t.test("a stream frame's text is taken escaped from its line when the REPL escaped it as JSON.stringify does", async (t) => {
  const asIs = ['', 'plain\n', 'quotes " and \\ backslashes \\" ending in one \\', 'tab\t cr\r ff\f bs\b', '","seq":1}', 'x'.repeat(65536)]
  // The REPL escapes non-ASCII, DEL and control characters as \uXXXX, JSON.stringify does not (all of them, or not in that form).
  const escapedElse = ['é ✓ 🎉', 'DEL \u007f', 'NUL \u0000 and \u001b[31m', 'a lone surrogate \ud800', 'a backslash-u \\u0041 in the text']
  const lines = replLines([...asIs, ...escapedElse])
  t.equal(lines.length, asIs.length + escapedElse.length)
  lines.forEach((line, i) => {
    const frame = parseFrame(line)!
    const event = frameToEvent(frame, 'model')!
    const logged = withTextJson({ ...event, pos: 3 })
    t.equal(eventJson(logged), JSON.stringify({ ...event, pos: 3 }), `text ${i}: the event's JSON`)
    t.equal(frameTextJson(line, JSON.parse(line) as object), i < asIs.length, `text ${i}: taken from the line: ${i < asIs.length}`)
  })
})

t.test('a line of any other shape (forged by sandbox code) has its text escaped anew', async (t) => {
  const head = '{"v":1,"type":"stream","exec_id":"exe_1","name":"stdout",'
  const forged = [
    `${head}"text":"shown","x":"other","seq":5}`,
    `${head}"text":"first","text":"second","seq":5}`,
    `${head}"x":{"text":"nested"},"text":"shown","seq":5}`,
    `{"v":1,"type":"stream","name":"stdout","exec_id":"exe_1","text":"order","seq":5}`,
    `${head}"text":"trailing","seq":5} `,
    `${head}"text":"no seq"}`,
    `{"v":1,"type":"stream","exec_id":"a\\"b","name":"stdout","text":"id","seq":5}`,
  ]
  for (const line of forged) {
    const frame = parseFrame(line)
    t.ok(frame, `parses: ${line}`)
    t.notOk(frameTextJson(line, JSON.parse(line) as object), `not taken: ${line}`)
    const event = frameToEvent(frame!, 'model')!
    t.equal(eventJson(withTextJson({ ...event })), JSON.stringify(event), `its event's JSON holds the parsed text: ${line}`)
  }
})

t.test('events without a text, and other values, are JSON.stringify', async (t) => {
  for (const v of [{ type: 'done', status: 'ok' }, withTextJson({ type: 'result', data: { 'text/plain': '1' } }), 'a string', 3, null])
    t.equal(eventJson(v), JSON.stringify(v))
})
