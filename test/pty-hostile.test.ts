// A terminal used against the API, with the API in its own process so its memory can be read: a
// shell flooding output to a client that never reads is held back in the sandbox (its writes block;
// the API's resident memory barely moves), the session's executions run meanwhile as fast as ever,
// input the shell does not take is held back in the client's connection, and closing the socket
// ends the flood.
import t from 'tap'
import { api, createSession, stdoutText } from './helpers/client.js'
import { figuresOf } from './helpers/channel-attack.js'
import { closePty, openPty, shellOutput, type PtyClient } from './helpers/pty.js'
import { isolatedServer } from './helpers/server-process.js'
import { waitFor } from './helpers/wait.js'

const MIB = 1024 * 1024
/** What the API may grow by while a terminal floods a client that never reads (its buffer is TERMINAL_BUFFER_BYTES, 256 KiB). */
const MAX_GROWTH_MB = 40

/** A bash execution's stdout in the session (throws on a failed request). */
async function bash(base: string, sid: string, code: string): Promise<string> {
  const r = await api(base, 'POST', `/v1/sessions/${sid}/executions`, { code, language: 'bash' })
  if (r.status !== 200) throw new Error(`execution failed: ${r.status} ${JSON.stringify(r.body)}`)
  return stdoutText(r.body.events)
}

/** Bytes the sandbox process running `pattern` has written, and again a second later (its /proc/PID/io). */
async function writesOver1s(base: string, sid: string, pattern: string): Promise<[number, number]> {
  const out = await bash(
    base,
    sid,
    `pid=$(for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q '^${pattern}' && echo \${p#/proc/}; done | head -1)
w() { awk '/^wchar/ {print $2}' /proc/$pid/io; }
a=$(w); sleep 1; echo "$a $(w)"`,
  )
  const [a, b] = out.trim().split(' ').map(Number)
  return [a!, b!]
}

t.test('a terminal that floods a client that never reads', async (t) => {
  const h = await isolatedServer(t, 'pty-hostile')
  const base = h.server.url
  const sid = await createSession(base)
  // Warm up what a terminal and an execution allocate once, so the baseline is a fair one.
  const warm = await openPty(base, sid)
  await shellOutput(warm, 'echo warm')
  await closePty(warm)
  await bash(base, sid, 'true')
  const before = figuresOf(h.server)

  const p: PtyClient = await openPty(base, sid)
  await shellOutput(p, 'true')
  p.type(`yes ${'y'.repeat(1000)}\r`)
  await p.until(/y{1000}\r\ny{1000}/)
  // From here the client reads nothing: its connection's buffers fill, then the API's share, then the shell waits.
  p.ws.pause()

  let stalled: [number, number] = [0, 0]
  t.ok(
    await waitFor(async () => {
      stalled = await writesOver1s(base, sid, 'yes')
      return stalled[1] === stalled[0]
    }, 60000),
    `the flood is held back in the sandbox: its writes stopped at ${(stalled[1] / MIB).toFixed(1)} MiB`,
  )

  const times: number[] = []
  for (let i = 0; i < 10; i++) {
    const t0 = performance.now()
    const r = await api(base, 'POST', `/v1/sessions/${sid}/executions`, { code: `print(${i} * 2)` })
    times.push(performance.now() - t0)
    t.equal(stdoutText(r.body.events), `${i * 2}\n`)
  }
  const worst = Math.max(...times)
  t.ok(worst < 2000, `the session's executions run meanwhile (the slowest of 10 took ${worst.toFixed(0)} ms)`)

  const during = figuresOf(h.server)
  const growth = during.rssMb - before.rssMb
  t.ok(
    growth < MAX_GROWTH_MB,
    `the API's memory barely moved: rss ${before.rssMb.toFixed(0)} -> ${during.rssMb.toFixed(0)} MB (peak ${during.peakRssMb.toFixed(0)} MB)`,
  )
  t.ok(during.peakRssMb - before.peakRssMb < MAX_GROWTH_MB, 'nor did its peak')

  // The client goes away without reading: the flood ends with the shell.
  p.ws.terminate()
  t.ok(
    await waitFor(async () => (await bash(base, sid, "grep -l '^yes' /proc/[0-9]*/cmdline 2>/dev/null || true")).trim() === '', 30_000, 100),
    'no yes is left',
  )
})

t.test("input the shell does not take waits in the client's connection", async (t) => {
  const h = await isolatedServer(t, 'pty-input')
  const base = h.server.url
  const sid = await createSession(base)
  const p = await openPty(base, sid)
  await shellOutput(p, 'true')
  const before = figuresOf(h.server)
  // A foreground program that reads nothing: the terminal's input queue fills, then Docker's pipe, then the API stops reading the socket.
  p.type('sleep 600\r')
  const chunk = Buffer.alloc(256 * 1024, 0x61)
  for (let i = 0; i < 200; i++) p.ws.send(chunk)
  // 50 MiB offered: what the client still holds shows where it waits.
  t.ok(await waitFor(() => p.ws.bufferedAmount < 50 * MIB, 30_000), 'some input was taken')
  t.ok(
    await waitFor(async () => {
      const a = p.ws.bufferedAmount
      await new Promise((r) => setTimeout(r, 500))
      return p.ws.bufferedAmount === a && a > 20 * MIB
    }, 20000),
    `most of it waits in the client (${(p.ws.bufferedAmount / MIB).toFixed(0)} MiB unsent)`,
  )
  const after = figuresOf(h.server)
  t.ok(after.rssMb - before.rssMb < MAX_GROWTH_MB, `the API's memory barely moved: rss ${before.rssMb.toFixed(0)} -> ${after.rssMb.toFixed(0)} MB`)
  const r = await api(base, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print("still here")' })
  t.equal(stdoutText(r.body.events), 'still here\n', 'executions run meanwhile')
  p.ws.terminate()
})
