// ReplClient and background processes' frames, over an in-memory transport: they go to the process
// handler (never to an execution, whatever exec_id they carry), malformed ones go nowhere, their text's
// JSON is taken from the line as it is, and two owners holding the frames back hold them until both let go.
import t from 'tap'
import { eventJson, frameTextJson } from '../../src/event-json.js'
import type { ProcessFrame, ReplFrame } from '../../src/repl/protocol.js'
import { connect } from '../helpers/repl-harness.js'

t.test("a process's frames go to the process handler, an execution's to its sink", async (t) => {
  const { client, repl } = connect()
  const procs: ProcessFrame[] = []
  const exec: ReplFrame[] = []
  client.onProcessFrame((f) => procs.push(f))
  client.execute('e', 'x', (f) => exec.push(f))
  repl.send({ type: 'proc_output', proc_id: 'p', pos: 1, name: 'stdout', text: 'one' })
  repl.send({ type: 'stream', exec_id: 'e', name: 'stdout', text: 'cell' })
  repl.send({ type: 'proc_limit', proc_id: 'p', pos: 2, what: 'output_bytes', exec_id: 'e' })
  repl.send({ type: 'proc_exit', proc_id: 'p', pos: 3, exit_code: 0 })
  t.same(
    procs.map((f) => [f.type, f.pos]),
    [
      ['proc_output', 1],
      ['proc_limit', 2],
      ['proc_exit', 3],
    ],
  )
  t.same(
    exec.map((f) => f.text),
    ['cell'],
    'a process frame naming an execution is still the process handler’s',
  )
})

t.test('a process frame without a string proc_id or an integer pos reaches no one', async (t) => {
  const { client, repl } = connect()
  const procs: ProcessFrame[] = []
  client.onProcessFrame((f) => procs.push(f))
  repl.send({ type: 'proc_output', pos: 1, name: 'stdout', text: 'no id' })
  repl.send({ type: 'proc_output', proc_id: 'p', pos: '1', name: 'stdout', text: 'pos as text' })
  repl.send({ type: 'proc_output', proc_id: 'p', pos: 1.5, name: 'stdout', text: 'pos not whole' })
  repl.send({ type: 'proc_output', proc_id: 7, pos: 1, name: 'stdout', text: 'numeric id' })
  t.same(procs, [])
})

t.test("an output frame's text JSON is taken from its line as it is (escaped once), a forged shape's is not", async (t) => {
  const line = '{"v":1,"type":"proc_output","proc_id":"prc_x","pos":4,"name":"stderr","text":"a \\"quoted\\"\\n","seq":1}'
  const frame = JSON.parse(line) as ProcessFrame
  t.equal(frame.text, 'a "quoted"\n')
  t.equal(frameTextJson(line, frame), true, "the REPL's own shape: marked")
  t.equal(eventJson({ type: 'stderr', text: frame.text }), JSON.stringify({ type: 'stderr', text: 'a "quoted"\n' }))
  const forged = '{"v":1,"type":"proc_output","proc_id":"prc_x","pos":4,"name":"stderr","text":"x","extra":"y","seq":1}'
  t.equal(frameTextJson(forged, JSON.parse(forged) as object), false, 'another shape: escaped anew')
  const { client, repl } = connect()
  const procs: ProcessFrame[] = []
  client.onProcessFrame((f) => procs.push(f))
  repl.sendRaw(line + '\n')
  t.equal(procs[0]!.text, 'a "quoted"\n', 'and through the client, intact')
})

t.test('frames held back by two owners come again once both let go', async (t) => {
  const { client, transport } = connect()
  client.holdFrames(true)
  client.holdFrames(true)
  t.equal(transport.paused, true)
  client.holdFrames(false)
  t.equal(transport.paused, true, 'one owner still holds them')
  client.holdFrames(false)
  t.equal(transport.paused, false, 'both let go')
  client.holdFrames(false)
  client.holdFrames(true)
  t.equal(transport.paused, true, 'an extra release does not leave a later hold ineffective')
})
