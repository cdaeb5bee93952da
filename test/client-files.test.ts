// The TypeScript client's files, bash and one-shot calls against a live server: a 5 MB upload that
// goes out while it is still being produced (streamed, not gathered first) and comes back byte for
// byte, every body kind, listing and deleting, bash exit codes, one-shot JSON and SSE, templates.
import t from 'tap'
import { createHash, randomBytes } from 'node:crypto'
import { createReadStream } from 'node:fs'
import { writeFile } from 'node:fs/promises'
import { createServer, connect, type Socket } from 'node:net'
import { InvalidRequestError, NotFoundError, ReplcastClient, ReplcastError, type ExecutionEvent } from '../clients/typescript/src/index.ts'
import { API_KEY, startApp } from './helpers/app.js'
import { api, stdoutText } from './helpers/client.js'
import { waitFor } from './helpers/wait.js'

/** A TCP proxy in front of the server that counts the bytes clients send through it. */
async function countingProxy(target: string): Promise<{ url: string; sent: () => number; close: () => Promise<void> }> {
  const { hostname, port } = new URL(target)
  const open = new Set<Socket>()
  let sent = 0
  const server = createServer((down) => {
    const up = connect(Number(port), hostname)
    for (const s of [down, up]) {
      open.add(s)
      s.on('close', () => open.delete(s))
      s.on('error', () => undefined)
    }
    down.on('data', (b: Buffer) => (sent += b.length))
    down.pipe(up).pipe(down)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const addr = server.address()
  return {
    url: `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`,
    sent: () => sent,
    close: () =>
      new Promise((resolve) => {
        for (const s of open) s.destroy()
        server.close(() => resolve())
      }),
  }
}

const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex')
const MIB = 1024 * 1024

t.test('client files, bash and one-shot', async (t) => {
  const h = await startApp(t)
  const proxy = await countingProxy(h.url)
  t.teardown(proxy.close)
  const client = new ReplcastClient({ url: proxy.url, apiKey: API_KEY })
  const session = await client.createSession({ idle_timeout_s: 120, limits: { workspace_mb: 32 } })
  t.teardown(() => client.deleteSession(session.id).catch(() => undefined))
  const sid = session.id

  t.test('putFile streams a 5 MB body while it is produced; getFile streams it back byte for byte', async (t) => {
    const data = randomBytes(5 * MIB)
    const chunk = 64 * 1024
    let offset = 0
    const start = proxy.sent()
    let waited = false
    const source = new ReadableStream<Uint8Array>(
      {
        async pull(ctrl) {
          // The last megabyte is produced only once 2 MiB have left the client: a client that gathered
          // the whole body before sending would wait here for ever.
          if (offset === 4 * MIB && !waited) {
            waited = true
            if (!(await waitFor(() => proxy.sent() - start >= 2 * MIB, 20000, 10))) {
              return ctrl.error(new Error('nothing was sent before the body was complete: the upload is buffered'))
            }
          }
          if (offset >= data.length) return ctrl.close()
          ctrl.enqueue(data.subarray(offset, offset + chunk))
          offset += chunk
        },
      },
      { highWaterMark: 0 },
    )
    const entry = await client.putFile(sid, 'big/blob.bin', source)
    t.match(entry, { path: 'big/blob.bin', type: 'file', size: data.length, created: true })
    t.ok(waited, 'the source was read to its end')

    const file = await client.getFile(sid, 'big/blob.bin')
    t.equal(file.size, data.length)
    t.equal(file.contentType, 'application/octet-stream')
    const parts: Uint8Array[] = []
    for await (const part of file.body) parts.push(part)
    t.ok(parts.length > 1, `the download arrived as a stream (${parts.length} pieces)`)
    t.equal(sha(Buffer.concat(parts)), sha(data), 'byte for byte')
    t.equal(sha(await client.readFile(sid, 'big/blob.bin')), sha(data), 'readFile: the bytes at once')
  })

  t.test('every body kind: string, Uint8Array, Blob, Node stream; text back with readTextFile', async (t) => {
    t.match(await client.putFile(sid, 'k/s.txt', 'héllo\n'), { size: 7, created: true })
    t.match(await client.putFile(sid, 'k/s.txt', 'again'), { size: 5, created: false }, 'replaced')
    t.equal(await client.readTextFile(sid, 'k/s.txt'), 'again')
    const bytes = Uint8Array.from([0, 1, 2, 255])
    await client.putFile(sid, 'k/u.bin', bytes)
    t.same(await client.readFile(sid, 'k/u.bin'), bytes)
    await client.putFile(sid, 'k/b.csv', new Blob(['a,b\n', '1,2\n']))
    const csv = await client.getFile(sid, 'k/b.csv')
    t.match(csv.contentType, /^text\/csv/)
    t.equal(await new Response(csv.body).text(), 'a,b\n1,2\n')
    const local = `${t.testdir()}/local.bin`
    const onDisk = randomBytes(300_000)
    await writeFile(local, onDisk)
    await client.putFile(sid, 'k/node.bin', createReadStream(local, { highWaterMark: 16 * 1024 }), { mode: 0o755 })
    t.equal(sha(await client.readFile(sid, 'k/node.bin')), sha(onDisk))
    const mode = await client.execute(sid, 'stat -c %a k/node.bin', { language: 'bash' })
    t.equal(stdoutText(mode.events), '755\n', 'mode was applied')
  })

  t.test('listFiles and deleteFile; errors are typed', async (t) => {
    const top = await client.listFiles(sid)
    t.same(
      top.files.map((f) => `${f.type}:${f.path}`),
      ['dir:big', 'dir:k'],
    )
    const all = await client.listFiles(sid, { path: 'k', recursive: true })
    t.same(
      all.files.map((f) => f.path),
      ['k/b.csv', 'k/node.bin', 'k/s.txt', 'k/u.bin'],
    )
    t.equal(all.truncated, false)
    await client.deleteFile(sid, 'k/u.bin')
    const gone = await client.getFile(sid, 'k/u.bin').catch((e: unknown) => e)
    t.type(gone, NotFoundError)
    t.equal((gone as ReplcastError).code, 'file_not_found')
    const dir = await client.deleteFile(sid, 'k').catch((e: unknown) => e)
    t.equal((dir as ReplcastError).code, 'is_a_directory')
    await client.deleteFile(sid, 'k', { recursive: true })
    t.same(
      (await client.listFiles(sid)).files.map((f) => f.path),
      ['big'],
    )
    const bad = await client.putFile(sid, '../outside.txt', 'x').catch((e: unknown) => e)
    t.type(bad, InvalidRequestError)
    t.equal((bad as ReplcastError).code, 'invalid_path')
    t.equal(await client.readTextFile(sid, 'big/../big/blob.bin').catch((e: unknown) => (e as ReplcastError).code), 'invalid_path')
  })

  t.test('bash with execute and stream: output and exit codes', async (t) => {
    const ex = await client.execute(sid, 'echo out; echo err >&2; exit 3', { language: 'bash' })
    t.equal(ex.status, 'error')
    t.match(ex.events.at(-1), { type: 'done', status: 'error', exit_code: 3 })
    const stream = await client.stream(sid, 'for i in 1 2 3; do echo $i; done', { language: 'bash' })
    const events: ExecutionEvent[] = []
    for await (const e of stream) events.push(e)
    t.equal(stdoutText(events), '1\n2\n3\n')
    t.equal(stream.status, 'ok')
    t.match(events.at(-1), { type: 'done', exit_code: 0 })
  })

  t.test('runOnce (JSON) and streamOnce (SSE): input files, nothing kept', async (t) => {
    const before = (await api(h.url, 'GET', '/v1/sessions')).body.sessions.length as number
    const ex = await client.runOnce('print(open("in.txt").read() + open("raw.bin", "rb").read().hex())\n7 * 6', {
      files: [
        { path: 'in.txt', content: 'from a file ' },
        { path: 'raw.bin', content: Uint8Array.from([1, 2, 255]) },
      ],
    })
    t.equal(ex.status, 'ok')
    t.equal(stdoutText(ex.events), 'from a file 0102ff\n')
    t.match(
      ex.events.find((e) => e.type === 'result'),
      { data: { 'text/plain': '42' } },
    )

    const stream = await client.streamOnce('import time\nprint("a", flush=True)\ntime.sleep(0.3)\nprint("b")', { timeout_s: 30 })
    const seen: string[] = []
    for await (const e of stream) seen.push(e.type === 'stdout' ? `stdout:${e.text}` : e.type)
    t.same(seen, ['status', 'stdout:a\n', 'stdout:b\n', 'done'])
    t.equal(stream.status, 'ok')

    const bash = await client.streamOnce('ls; exit 5', { language: 'bash', files: [{ path: 'only.txt', content: 'x' }] })
    const events: ExecutionEvent[] = []
    for await (const e of bash) events.push(e)
    t.equal(stdoutText(events), 'only.txt\n', 'a fresh workspace with only its own input file')
    t.match(events.at(-1), { type: 'done', status: 'error', exit_code: 5 })
    t.ok(await waitFor(async () => (await api(h.url, 'GET', '/v1/sessions')).body.sessions.length === before), 'the one-shot sessions are gone')

    const unknown = await client.runOnce('1', { template: 'no-such-template' }).catch((e: unknown) => e)
    t.type(unknown, InvalidRequestError)
    t.equal((unknown as ReplcastError).code, 'unknown_template')
  })

  t.test('listTemplates', async (t) => {
    const { templates } = await client.listTemplates()
    t.match(
      templates.find((x) => x.default),
      { name: 'default', default: true },
    )
  })
})
