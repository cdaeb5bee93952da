// ReplClient against a misbehaving sandbox: it stops reading its input (the host's buffer is
// bounded), it keeps breaking the protocol (rate-limited logs, then the channel ends), and every
// waiter learns why through SandboxMisbehaved.
import t from 'tap'
import { ReplClient, SandboxMisbehaved } from '../../src/repl/repl-client.js'
import { SANDBOX_LOG_LINES } from '../../src/repl/limited-log.js'
import { memoryTransportPair, MemoryTransport } from '../helpers/memory-transport.js'
import { recordingLogger } from '../helpers/repl-harness.js'

/** A transport whose far side stopped reading: everything written stays buffered. */
class StalledTransport extends MemoryTransport {
  buffered = 0
  override write(data: string): void {
    this.buffered += Buffer.byteLength(data)
  }
  bufferedBytes(): number {
    return this.buffered
  }
}

function setup(opts: { inputBufferBytes?: number; maxViolations?: number }, stalled = false) {
  const pair = memoryTransportPair()
  let transport: MemoryTransport = pair.transport
  if (stalled) {
    const s = new StalledTransport()
    s.peer = pair.repl
    pair.repl.host = s
    transport = s
  }
  const { log, warnings } = recordingLogger()
  const client = new ReplClient(transport, log, { readyTimeoutMs: 60_000, expectReady: false, ...opts })
  const closed = new Promise<Error | undefined>((resolve) => client.onClose(resolve))
  return { client, repl: pair.repl, transport, warnings, closed }
}

t.test('a sandbox that stops reading: past the input bound the channel ends with SandboxMisbehaved', async (t) => {
  const { client, transport, closed } = setup({ inputBufferBytes: 10_000 }, true)
  const pending = client.request('set_var', { name: 'x', value: 'y'.repeat(20_000) }, 60_000)
  t.equal((transport as StalledTransport).buffered > 20_000, true, 'a frame longer than the bound goes when nothing waits')
  client.sendLlmResponse('r1', { text: 'answer' })
  const err = await closed
  t.type(err, SandboxMisbehaved)
  t.match((err as SandboxMisbehaved).reason, /stopped reading its input/)
  await t.rejects(pending, SandboxMisbehaved, 'pending requests fail with the reason')
  t.ok(transport.closed, 'the transport is closed')
})

t.test('protocol violations are logged at a bounded rate and, past the limit, end the channel', async (t) => {
  const { repl, warnings, closed } = setup({ maxViolations: 100 })
  repl.sendRaw('x\n'.repeat(50))
  t.equal(warnings.length, SANDBOX_LOG_LINES, `only ${SANDBOX_LOG_LINES} of 50 bad lines are logged`)
  repl.sendRaw('x\n'.repeat(100))
  const err = await closed
  t.type(err, SandboxMisbehaved)
  t.match((err as SandboxMisbehaved).reason, /broke the REPL protocol more than 100 times/)
  t.match(warnings.at(-1), { obj: { suppressed: 81 }, msg: /suppressed/ }, 'the close writes how many lines were suppressed')
})

t.test('without bounds configured nothing is enforced (the default for tests and tools)', async (t) => {
  const { client, repl, warnings } = setup({})
  repl.sendRaw('x\n'.repeat(2000))
  t.equal(warnings.length, SANDBOX_LOG_LINES)
  t.match(await client.ready, { type: 'ready' }, 'the client is still usable')
})
