// The terminal socket's one text frame from the client (src/http/pty-socket.ts): a resize with two
// whole sizes of 1..1000 is taken; anything else (other types, fractions, zero, strings, extra
// nesting, not JSON) is not, and the route then closes the socket with 1008.
import t from 'tap'
import { MAX_TERMINAL_SIDE, parseResize } from '../../src/http/pty-socket.js'

t.test('a resize frame is taken', async (t) => {
  t.same(parseResize('{"type":"resize","cols":80,"rows":24}'), { cols: 80, rows: 24 })
  t.same(parseResize(JSON.stringify({ rows: 1, type: 'resize', cols: MAX_TERMINAL_SIDE, extra: true })), { cols: MAX_TERMINAL_SIDE, rows: 1 })
})

t.test('anything else is not', async (t) => {
  for (const text of [
    '',
    'resize',
    'null',
    '[]',
    '{"type":"resize","cols":80}',
    '{"type":"resize","cols":0,"rows":24}',
    `{"type":"resize","cols":${MAX_TERMINAL_SIDE + 1},"rows":24}`,
    '{"type":"resize","cols":80.5,"rows":24}',
    '{"type":"resize","cols":"80","rows":"24"}',
    '{"type":"Resize","cols":80,"rows":24}',
    '{"type":"exit","exit_code":0}',
    '{"type":"resize","cols":-80,"rows":24}',
  ])
    t.equal(parseResize(text), null, JSON.stringify(text))
})
