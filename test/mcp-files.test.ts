// The MCP tools for files, bash and one-shot execution, driven by the SDK's own client against a
// live server (real Docker and Redis): bytes round-trip exactly (text as text, a PNG as image
// content, other binary as an embedded resource), bash exit codes, one-shots with input files, and
// the API's error codes as error results.
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { deflateSync, crc32 } from 'node:zlib'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { API_KEY, OTHER_KEY, startApp } from './helpers/app.js'
import { api, createSession } from './helpers/client.js'
import { getFile, putFile } from './helpers/files.js'
import { connectMcp, textOf } from './helpers/mcp.js'
import { waitFor } from './helpers/wait.js'

const connect = (url: string, key = API_KEY) => connectMcp(url, key)

/** A real PNG (8x8 RGB, each pixel different), built here so its bytes are known exactly. */
function png(): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const len = Buffer.alloc(4)
    len.writeUInt32BE(data.length)
    const body = Buffer.concat([Buffer.from(type, 'latin1'), data])
    const crc = Buffer.alloc(4)
    crc.writeUInt32BE(crc32(body))
    return Buffer.concat([len, body, crc])
  }
  const ihdr = Buffer.alloc(13)
  ihdr.writeUInt32BE(8, 0)
  ihdr.writeUInt32BE(8, 4)
  ihdr.set([8, 2, 0, 0, 0], 8) // 8 bits per channel, RGB
  const rows = Buffer.concat(Array.from({ length: 8 }, (_, y) => Buffer.from([0, ...Array.from({ length: 8 }, (_, x) => [x * 32, y * 32, 128]).flat()])))
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(rows)),
    chunk('IEND', Buffer.alloc(0)),
  ])
}

t.test('MCP files, bash and one-shot tools', async (t) => {
  const h = await startApp(t)
  const client = await connect(h.url)
  t.teardown(() => client.close())
  const call = async (name: string, args: Record<string, unknown>) => (await client.callTool({ name, arguments: args })) as CallToolResult
  const sid = await createSession(h.url)

  t.test('the new tools are listed with schemas from the API', async (t) => {
    const { tools } = await client.listTools()
    const byName = new Map(tools.map((tool) => [tool.name, tool]))
    for (const name of ['run_bash', 'write_file', 'read_file', 'list_files', 'delete_file', 'execute']) t.ok(byName.has(name), name)
    t.same(byName.get('write_file')!.inputSchema.required, ['session_id', 'path', 'content'])
    t.match(byName.get('execute')!.inputSchema.properties, { language: { anyOf: [{ const: 'python' }, { const: 'bash' }] }, template: { maxLength: 64 } })
    t.equal(byName.get('read_file')!.annotations?.readOnlyHint, true)
    t.equal(byName.get('delete_file')!.annotations?.destructiveHint, true)
  })

  t.test('write_file then read_file: text comes back as the same text', async (t) => {
    const content = 'naïve café ☕\nline two\n\n  indented\ttab\r\nend without newline'
    const w = await call('write_file', { session_id: sid, path: 'notes/hello.txt', content })
    t.notOk(w.isError, textOf(w))
    t.match(textOf(w), /notes\/hello\.txt/)
    t.same((await getFile(h.url, sid, 'notes/hello.txt')).bytes, Buffer.from(content), 'the HTTP API sees the same bytes')
    const r = await call('read_file', { session_id: sid, path: 'notes/hello.txt' })
    t.notOk(r.isError)
    t.same(
      r.content.map((c) => c.type),
      ['text'],
    )
    t.equal(textOf(r), content, 'byte for byte')
  })

  t.test('binary: base64 in; a PNG back as image content, other bytes as an embedded resource', async (t) => {
    const image = png()
    const w = await call('write_file', { session_id: sid, path: 'img/dot.png', content: image.toString('base64'), encoding: 'base64' })
    t.notOk(w.isError, textOf(w))
    t.same((await getFile(h.url, sid, 'img/dot.png')).bytes, image)
    const r = await call('read_file', { session_id: sid, path: 'img/dot.png' })
    t.notOk(r.isError)
    const img = r.content.find((c) => c.type === 'image')
    t.equal(img?.type === 'image' && img.mimeType, 'image/png')
    t.same(Buffer.from(img?.type === 'image' ? img.data : '', 'base64'), image, 'the image content is the file, byte for byte')

    const blob = Buffer.concat([Buffer.from([0, 255, 0x80, 0xfe]), randomBytes(4096)])
    await putFile(h.url, sid, 'data/blob.bin', blob)
    const b = await call('read_file', { session_id: sid, path: 'data/blob.bin' })
    t.notOk(b.isError)
    const res = b.content.find((c) => c.type === 'resource')
    const resource = res?.type === 'resource' ? res.resource : undefined
    t.equal(resource?.mimeType, 'application/octet-stream')
    t.same(Buffer.from(resource && 'blob' in resource ? resource.blob : '', 'base64'), blob)
  })

  t.test('list_files and delete_file', async (t) => {
    const all = await call('list_files', { session_id: sid, recursive: true })
    t.notOk(all.isError)
    const listed = JSON.parse(textOf(all)) as { files: Array<{ path: string; type: string; size: number }> }
    t.match(listed.files, [
      { path: 'data', type: 'dir' },
      { path: 'data/blob.bin', type: 'file', size: 4100 },
      { path: 'img', type: 'dir' },
      { path: 'img/dot.png', type: 'file' },
      { path: 'notes', type: 'dir' },
      { path: 'notes/hello.txt', type: 'file' },
    ])
    const d = await call('delete_file', { session_id: sid, path: 'data/blob.bin' })
    t.notOk(d.isError, textOf(d))
    const gone = await call('read_file', { session_id: sid, path: 'data/blob.bin' })
    t.equal(gone.isError, true)
    t.match(textOf(gone), /^file_not_found: /)
    const dir = await call('delete_file', { session_id: sid, path: 'notes' })
    t.match(textOf(dir), /^is_a_directory: /, 'a folder needs recursive')
    t.notOk((await call('delete_file', { session_id: sid, path: 'notes', recursive: true })).isError)
    const top = JSON.parse(textOf(await call('list_files', { session_id: sid }))) as { files: Array<{ path: string }> }
    t.same(
      top.files.map((f) => f.path),
      ['data', 'img'],
    )
  })

  t.test('run_bash: output, the exit code in the result, nonzero exit is an error result', async (t) => {
    const ok = await call('run_bash', { session_id: sid, code: 'ls img; echo err >&2' })
    t.notOk(ok.isError, textOf(ok))
    t.equal(textOf(ok), 'dot.png\nerr\n[exit code 0]\n')
    const bad = await call('run_bash', { session_id: sid, code: 'echo failing; exit 3' })
    t.equal(bad.isError, true)
    t.equal(textOf(bad), 'failing\n[exit code 3]\n')
  })

  t.test('read_file refuses a file above its size limit, saying what to do instead', async (t) => {
    t.notOk((await call('run_bash', { session_id: sid, code: 'head -c 3000000 /dev/zero > big.bin' })).isError)
    const r = await call('read_file', { session_id: sid, path: 'big.bin' })
    t.equal(r.isError, true)
    t.match(textOf(r), /^payload_too_large: big\.bin is 3000000 bytes[\s\S]*run_bash/)
  })

  t.test('errors come back as error results with their stable code', async (t) => {
    for (const [tool, args] of [
      ['write_file', { path: '../escape.txt', content: 'x' }],
      ['read_file', { path: '/etc/passwd' }],
      ['list_files', { path: 'a/../../b' }],
      ['delete_file', { path: '..' }],
    ] as const) {
      const r = await call(tool, { session_id: sid, ...args })
      t.equal(r.isError, true, tool)
      t.match(textOf(r), /^invalid_path: /, tool)
    }
    const badB64 = await call('write_file', { session_id: sid, path: 'x.bin', content: 'not base64!', encoding: 'base64' })
    t.match(textOf(badB64), /^bad_request: .*base64/)
    const other = await connect(h.url, OTHER_KEY)
    t.teardown(() => other.close())
    const foreign = (await other.callTool({ name: 'read_file', arguments: { session_id: sid, path: 'img/dot.png' } })) as CallToolResult
    t.match(textOf(foreign), /^session_not_found: /, "another tenant cannot read the session's files")
  })

  t.test('execute: one-shot code with input files, in a fresh sandbox that goes afterwards', async (t) => {
    const before = (await api(h.url, 'GET', '/v1/sessions')).body.sessions.length as number
    const r = await call('execute', {
      code: 'import os\nprint(open("in/data.csv").read().upper(), end="")\nprint(sorted(os.listdir(".")))\nx = 5\nx * 2',
      files: [
        { path: 'in/data.csv', content: 'a,b\n1,2\n' },
        { path: 'raw.bin', content: Buffer.from([0, 1, 2]).toString('base64'), encoding: 'base64' },
      ],
    })
    t.notOk(r.isError, textOf(r))
    t.equal(textOf(r), "A,B\n1,2\n['in', 'raw.bin']\n10\n")
    const bash = await call('execute', {
      code: 'od -An -tu1 raw.bin; exit 4',
      language: 'bash',
      files: [{ path: 'raw.bin', content: 'AAEC', encoding: 'base64' }],
    })
    t.equal(bash.isError, true)
    t.match(textOf(bash), /^\s*0\s+1\s+2\n\[exit code 4\]\n$/)
    const fresh = await call('execute', { code: 'print("x" in globals())' })
    t.equal(textOf(fresh), 'False\n', 'nothing of the previous one-shot is there')
    t.ok(await waitFor(async () => (await api(h.url, 'GET', '/v1/sessions')).body.sessions.length === before), 'their sessions are gone')
    const unknown = await call('execute', { code: '1', template: 'no-such-template' })
    t.equal(unknown.isError, true)
    t.match(textOf(unknown), /^unknown_template: /)
    const badPath = await call('execute', { code: '1', files: [{ path: '/abs.txt', content: 'x' }] })
    t.match(textOf(badPath), /^invalid_path: /)
  })
})
