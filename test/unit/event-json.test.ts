// eventJson (src/event-json.ts): an output event's JSON with its text escaped once is the JSON of the
// event, whatever the text or the other fields hold, for the event and for the copies made of it.
import t from 'tap'
import { eventJson, withTextJson } from '../../src/event-json.js'

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
})

t.test('events without a text, and other values, are JSON.stringify', async (t) => {
  for (const v of [{ type: 'done', status: 'ok' }, withTextJson({ type: 'result', data: { 'text/plain': '1' } }), 'a string', 3, null])
    t.equal(eventJson(v), JSON.stringify(v))
})
