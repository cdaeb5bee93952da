// Resuming from the container log without trusting the sandbox's seq: frames replayed by position,
// the anchor and the loss report when the log was cut, live frames that repeat the log's tail, and
// frames that Docker's log glued together.
import t from 'tap'
import { executionFrames, framesToReplay, LiveOverlap } from '../../src/sessions/runner/log-replay.js'
import type { ReplFrame } from '../../src/repl/protocol.js'

const status = (seq: number): ReplFrame => ({ v: 1, type: 'status', exec_id: 'e', state: 'running', seq })
const out = (text: string, seq: number): ReplFrame => ({ v: 1, type: 'stream', exec_id: 'e', name: 'stdout', text, seq })

t.test('a whole log is replayed by position, whatever seq the frames carry', async (t) => {
  const logged = [status(1), out('a', 2), out('forged', 1e15), out('b', 3), out('c', 4)]
  t.same(framesToReplay(logged, { pos: 3, seq: 1e15 }), { frames: [out('b', 3), out('c', 4)], lost: false })
  t.same(framesToReplay(logged, { pos: 0, seq: -1 }).frames, logged, 'nothing handled: everything')
  t.same(framesToReplay([], { pos: 2, seq: 3 }), { frames: [], lost: false }, 'an empty log')
})

t.test('a cut log is anchored on the last frame the host logged, and reports a loss when that is gone', async (t) => {
  const cut = [out('b', 7), out('c', 8), out('d', 9)]
  t.same(framesToReplay(cut, { pos: 5, seq: 7 }), { frames: [out('c', 8), out('d', 9)], lost: false }, 'anchor found')
  t.same(framesToReplay(cut, { pos: 5, seq: 6 }), { frames: cut, lost: false }, 'the log starts right after the last frame handled')
  t.same(framesToReplay(cut, { pos: 2, seq: 3 }), { frames: cut, lost: true }, 'frames between were lost')
  t.same(framesToReplay(cut, { pos: 2, seq: 1e15 }), { frames: cut, lost: true }, 'a forged seq costs a loss report, never frames')
})

t.test('live frames that repeat the end of the log are dropped, then everything passes', async (t) => {
  const logged = [status(1), out('a', 2), out('b', 3), out('c', 4)]
  const o = new LiveOverlap(logged)
  t.same(
    [out('b', 3), out('c', 4), out('d', 5), out('b', 3)].map((f) => o.isNew(f)),
    [false, false, true, true],
  )
  const fresh = new LiveOverlap(logged)
  t.same(
    [out('d', 5), out('c', 4)].map((f) => fresh.isNew(f)),
    [true, true],
    'a first live frame the log does not hold: all new',
  )
  t.ok(new LiveOverlap([]).isNew(out('a', 1)), 'no log: all new')
})

t.test("frames glued by Docker's log (a lost newline) are split again; other executions' frames and junk are left out", async (t) => {
  const line = (f: object) => JSON.stringify(f)
  const text = [
    line(status(1)) + line(out('x'.repeat(20000), 2)) + line(out('y', 3)),
    'junk',
    line({ v: 1, type: 'stream', exec_id: 'other', name: 'stdout', text: '}{"v":', seq: 4 }),
    line({ v: 1, type: 'reply', exec_id: 'e', reply_to: 'r', seq: 5 }),
    line(out('z', 6)),
    '',
  ].join('\n')
  t.same(
    executionFrames(Buffer.from(text), 'e').map((f) => f.seq),
    [1, 2, 3, 6],
  )
})
