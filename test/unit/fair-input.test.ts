// A sandbox's output is handled a share at a time (src/repl/fair-input.ts): past its share of a turn
// of the event loop the rest waits for the next turn with the transport held; beside other sandboxes
// it is handled at no more than its rate; the owner's hold and the share hold the transport together;
// and what waits is handled before the channel's close.
import t from 'tap'
import { ReplClient } from '../../src/repl/repl-client.js'
import type { ReplFrame } from '../../src/repl/protocol.js'
import { TURN_BYTES } from '../../src/repl/fair-input.js'
import { memoryTransportPair } from '../helpers/memory-transport.js'
import { flush, recordingLogger, texts } from '../helpers/repl-harness.js'
import { waitFor } from '../helpers/wait.js'

const KIB = 1024

/** A client on an in-memory channel whose frames of execution `e` are collected in `got`. */
function sandbox(outputBytesPerS?: number) {
  const { transport, repl } = memoryTransportPair()
  const client = new ReplClient(transport, recordingLogger().log, { readyTimeoutMs: 60_000, expectReady: false, outputBytesPerS })
  const got: ReplFrame[] = []
  client.track('e', (f) => got.push(f))
  /** `n` stream frames of `bytes` characters each, in one chunk, their texts numbered. */
  const burst = (n: number, bytes: number) => {
    const line = (i: number) => JSON.stringify({ v: 1, type: 'stream', exec_id: 'e', name: 'stdout', text: `${i}:`.padEnd(bytes, 'x') }) + '\n'
    repl.sendRaw(Array.from({ length: n }, (_, i) => line(i)).join(''))
  }
  const numbers = () => texts(got).map((s) => Number(String(s).split(':')[0]))
  return { client, transport, repl, got, burst, numbers }
}

// First, while no other sandbox in this process has had output: the rate binds only beside others.
t.test('a sandbox writing alone is not held to its rate', async (t) => {
  const s = sandbox(10 * KIB)
  s.burst(5, 4 * KIB)
  t.same(s.numbers(), [0, 1, 2, 3, 4], '20 KiB at once, with a rate of 10 KiB a second')
  t.equal(s.transport.paused, false)
})

t.test("output past a sandbox's share of a turn waits for the next turn, the transport held meanwhile", async (t) => {
  const s = sandbox()
  const frames = Math.ceil((3 * TURN_BYTES) / (16 * KIB))
  s.burst(frames, 16 * KIB)
  const first = s.got.length
  t.ok(first > 0 && first < frames, `${first} of ${frames} frames of 16 KiB handled in the first turn`)
  t.equal(s.transport.paused, true, 'the transport is held while the rest waits')
  t.ok(await waitFor(() => s.got.length === frames, 5000), 'the rest comes in the next turns')
  t.same(
    s.numbers(),
    Array.from({ length: frames }, (_, i) => i),
    'in order',
  )
  t.equal(s.transport.paused, false, 'and the transport is let go once nothing waits')
})

t.test("the owner's hold keeps the transport held after the share lets it go, and the share after the owner does", async (t) => {
  const s = sandbox()
  const frames = Math.ceil((2 * TURN_BYTES) / (16 * KIB))
  s.burst(frames, 16 * KIB)
  t.ok(s.got.length < frames, 'some frames wait for the next turn')
  s.client.holdFrames(true)
  t.ok(await waitFor(() => s.got.length === frames, 5000), 'what came is still handled, turn by turn')
  await flush()
  t.equal(s.transport.paused, true, 'nothing waits for the next turn, but the owner holds the transport')
  s.client.holdFrames(false)
  t.equal(s.transport.paused, false, 'let go by the owner')
  s.burst(frames, 16 * KIB)
  s.client.holdFrames(true)
  s.client.holdFrames(false)
  t.equal(s.transport.paused, true, 'let go by the owner while bytes wait for the next turn: still held')
  t.ok(await waitFor(() => s.got.length === 2 * frames, 5000))
  t.equal(s.transport.paused, false)
})

t.test('beside another sandbox, a sandbox past its rate in this tenth of a second waits for the next', async (t) => {
  const other = sandbox()
  other.burst(1, 100)
  const s = sandbox(40 * KIB) // 4 KiB per tenth of a second
  s.burst(4, 2 * KIB)
  t.ok(s.got.length >= 1 && s.got.length < 4, `${s.got.length} of 4 frames of 2 KiB handled at once`)
  t.equal(s.transport.paused, true, 'the transport is held')
  t.ok(await waitFor(() => s.got.length === 4, 5000), 'the rest comes in the next tenths of a second')
  t.same(s.numbers(), [0, 1, 2, 3], 'in order')
  t.equal(s.transport.paused, false)
})

t.test("what waits for the next turn is handled before the channel's close is", async (t) => {
  const s = sandbox()
  const order: string[] = []
  s.client.onClose(() => order.push(`closed after ${s.got.length} frames`))
  const frames = Math.ceil((2 * TURN_BYTES) / (16 * KIB))
  s.burst(frames, 16 * KIB)
  t.ok(s.got.length < frames, 'some frames wait')
  s.repl.close()
  t.same(order, [`closed after ${frames} frames`])
})
