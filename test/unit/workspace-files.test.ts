// WorkspaceFiles (src/sandbox/workspace-files.ts) against a stand-in Docker engine whose programs
// are scripted: one that never answers (a starved sandbox, an engine that loses the output, a
// program sandbox code stopped), one that stops taking an upload, one that goes quiet after its
// commit or in the middle of a download. Every wait ends within the deadline, the program's
// connection is closed and the program killed by its tag; a client that leaves ends the wait at once.
import t, { type Test } from 'tap'
import { Duplex } from 'node:stream'
import type Docker from 'dockerode'
import { WorkspaceFiles } from '../../src/sandbox/workspace-files.js'
import { waitFor } from '../helpers/wait.js'

const STALL_MS = 200

/** One program as the engine runs it: its arguments, what it was sent, and its side of the connection. */
interface FakeProgram {
  args: Record<string, unknown>
  socket: Duplex
  input: Buffer[]
  /** Writes a stdout frame. */
  say(data: string | Buffer): void
  /** The program ends: its output is over. */
  exit(): void
}

type Script = (p: FakeProgram) => void

/** `takes`: whether the program takes its input (a stopped program takes nothing: writes back up). */
function engine(script: (op: string) => Script, takes: (op: string) => boolean = () => true) {
  const programs: FakeProgram[] = []
  const docker = {
    getContainer: () => ({
      exec: async (opts: { Cmd: string[] }) => ({
        start: async () => {
          const args = JSON.parse(opts.Cmd.at(-1)!) as Record<string, unknown>
          const input: Buffer[] = []
          const socket = new Duplex({
            read: () => undefined,
            write: (chunk: Buffer, _enc, done) => {
              input.push(chunk)
              if (takes(String(args.op))) done()
            },
            final: (done) => done(),
          })
          const frame = (data: string | Buffer) => {
            const body = Buffer.from(data)
            const head = Buffer.alloc(8)
            head[0] = 1
            head.writeUInt32BE(body.length, 4)
            socket.push(Buffer.concat([head, body]))
          }
          const p: FakeProgram = { args, socket, input, say: frame, exit: () => socket.push(null) }
          programs.push(p)
          queueMicrotask(() => script(String(args.op))(p))
          return socket
        },
      }),
    }),
  } as unknown as Docker
  const files = new WorkspaceFiles({ docker, user: '1000:1000', timeoutMs: 5000, stallMs: STALL_MS })
  /** The kill runs started for `target`'s tag (they start in the background: this waits for one, up to a second). */
  const killsOf = async (target: FakeProgram | undefined) => {
    const found = () => programs.filter((p) => p.args.op === 'kill' && p.args.target === target?.args.tag)
    await waitFor(() => found().length > 0, 1000, 5)
    return found().length
  }
  return { docker, files, programs, killsOf, last: (op: string) => programs.filter((p) => p.args.op === op).at(-1) }
}

const silent: Script = () => undefined
const killer: Script = (p) => {
  p.say('{"ok": true, "killed": 1}\n')
  p.exit()
}
const within = async <T>(t: Test, what: string, p: Promise<T>) => {
  const t0 = performance.now()
  try {
    return await p
  } finally {
    const ms = performance.now() - t0
    t.ok(ms < STALL_MS + 1000, `${what}: ended in ${Math.round(ms)} ms`)
  }
}

t.test('a file program that never answers fails the operation within the deadline, and is killed', async (t) => {
  const e = engine((op) => (op === 'kill' ? killer : silent))
  for (const [what, op] of [
    ['list', (): Promise<unknown> => e.files.list('c1', '', false)],
    ['get', () => e.files.get('c1', 'a.txt', { maxBytes: 10 })],
    ['delete', () => e.files.delete('c1', 'a.txt', false)],
    ['put', () => e.files.put('c1', 'a.txt', [Buffer.from('x')], { maxBytes: 10 })],
  ] as const) {
    await t.rejects(
      within(t, what, op()),
      { code: 'no_answer', message: new RegExp(`no progress with the file operation within ${STALL_MS} ms`) },
      `${what} fails`,
    )
    const p = e.last(what)
    t.ok(p?.socket.destroyed, `${what}: the program's connection is closed`)
    t.equal(await e.killsOf(p), 1, `${what}: the program is killed by its tag`)
  }
})

t.test('an upload the program stops taking fails within the deadline', async (t) => {
  const e = engine(
    (op) => (op === 'kill' ? killer : (p) => p.say('{"ready": true}\n')),
    (op) => op !== 'put',
  )
  const body = (function* () {
    for (let i = 0; i < 64; i++) yield Buffer.alloc(64 * 1024)
  })()
  await t.rejects(within(t, 'put', e.files.put('c1', 'big.bin', body, { maxBytes: 1 << 30 })), { code: 'no_answer' })
  t.equal(await e.killsOf(e.last('put')), 1, 'the program is killed')
})

t.test('an upload whose answer never comes after its commit fails within the deadline', async (t) => {
  const e = engine((op) => (op === 'kill' ? killer : (p) => p.say('{"ready": true}\n')))
  await t.rejects(within(t, 'put', e.files.put('c1', 'a.txt', [Buffer.from('hello')], { maxBytes: 10 })), { code: 'no_answer' })
  const put = e.last('put')!
  t.same(Buffer.concat(put.input), Buffer.from([0, 0, 0, 5, ...Buffer.from('hello'), 0, 0, 0, 0]), 'the frames and the commit were sent')
  t.equal(await e.killsOf(put), 1, 'the program is killed')
})

t.test('a download the sandbox stops sending is cut within the deadline; a slow reader is not', async (t) => {
  const e = engine((op) =>
    op === 'kill'
      ? killer
      : (p) => {
          p.say(`{"ok": true, "path": "f.bin", "type": "file", "size": 1000000, "mtime": 0}\n`)
          p.say(Buffer.alloc(300_000))
        },
  )
  const { body } = await e.files.get('c1', 'f.bin', { maxBytes: 1 << 20 })
  // Its reader waits past the deadline first: the bytes wait on it, not it on the sandbox.
  await new Promise((r) => setTimeout(r, 2 * STALL_MS))
  let got = 0
  const read = (async () => {
    for await (const chunk of body as AsyncIterable<Buffer>) got += chunk.length
  })()
  await t.rejects(within(t, 'the body', read), /no progress with the file operation within 200 ms: it ended 700000 bytes early/)
  t.equal(got, 300_000, 'what came was delivered')
  t.equal(await e.killsOf(e.last('get')), 1, 'the program is killed')
})

t.test('a client that leaves ends the wait at once and the program is killed', async (t) => {
  const e = engine((op) => (op === 'kill' ? killer : silent))
  const ac = new AbortController()
  const get = e.files.get('c1', 'a.txt', { maxBytes: 10, signal: ac.signal })
  await new Promise((r) => setTimeout(r, 20))
  const t0 = performance.now()
  ac.abort()
  await t.rejects(get, { code: 'aborted' })
  t.ok(performance.now() - t0 < STALL_MS / 2, 'at once, not at the deadline')
  t.equal(await e.killsOf(e.last('get')), 1)
})

t.test('a program that ends by itself is not killed; one larger than the bound is refused from its header', async (t) => {
  const e = engine((op) =>
    op === 'kill'
      ? killer
      : (p) => {
          if (p.args.op === 'get') {
            p.say(`{"ok": true, "path": "huge.bin", "type": "file", "size": 17179869184, "mtime": 0}\n`)
            p.say(Buffer.alloc(65536)) // an older program that does not know max_bytes begins to send
            return
          }
          p.say('{"ok": true, "entries": [], "truncated": false}\n')
          p.exit()
        },
  )
  t.match(await e.files.list('c1', '', false), { entries: [], truncated: false })
  const list = e.last('list')!
  // Its release runs once its connection ended: a kill would have started by the next turn.
  await waitFor(() => list.socket.readableEnded)
  await new Promise((r) => setImmediate(r))
  t.equal(e.programs.filter((p) => p.args.op === 'kill').length, 0, 'the listing ended by itself: nothing to kill')
  await t.rejects(e.files.get('c1', 'huge.bin', { maxBytes: 1 << 20 }), { code: 'too_large', size: 17179869184 })
  t.equal(await e.killsOf(e.last('get')), 1, 'the sending program is killed')
})
