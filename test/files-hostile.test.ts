// Workspace files against hostile input and hostile sandboxes: path traversal in every spelling,
// symlinks planted by sandbox code (read and written through, and swapped in while the API walks
// the path), another tenant's session, uploads larger than the workspace or the file limit (the
// workspace left as it was), special files, a dead sandbox, and the file program's identity.
import t from 'tap'
import { randomBytes } from 'node:crypto'
import Docker from 'dockerode'
import { request } from 'node:http'
import { LABEL } from '../src/sandbox/labels.js'
import { readLine, startInSandbox } from '../src/sandbox/sandbox-exec.js'
import { API_KEY, OTHER_KEY, startApp } from './helpers/app.js'
import { api, createSession, executeSse } from './helpers/client.js'
import { deleteFile, fileRequest, fileUrl, getFile, LIST_PROCESSES, listFiles, putFile, python, rawRequest } from './helpers/files.js'
import { waitFor } from './helpers/wait.js'

const docker = new Docker()
const containerOf = async (sid: string) => (await docker.listContainers({ filters: { label: [`${LABEL.session}=${sid}`] } }))[0]!.Id

/** Everything in the workspace (hidden files too) with sizes, and the tmpfs's free blocks. */
const WORKSPACE_STATE = `import os, json
files = sorted((os.path.relpath(os.path.join(d, n)), os.path.getsize(os.path.join(d, n))) for d, _, ns in os.walk('.') for n in ns)
print(json.dumps([files, os.statvfs('.').f_bfree]))`

t.test('hostile paths and sandboxes', async (t) => {
  const h = await startApp(t, { SANDBOX_POOL_SIZE: '0' })
  const sid = await createSession(h.url)
  await putFile(h.url, sid, 'inside.txt', 'inside')
  await python(h.url, sid, "open('/tmp/outside.txt', 'w').write('OUTSIDE')")
  const tmpBefore = await python(h.url, sid, "import os\nprint(sorted(os.listdir('/tmp')))")

  t.test('path traversal in every spelling is 400 invalid_path, for every method', async (t) => {
    const base = `/v1/sessions/${sid}/files/`
    const spellings = [
      '..',
      '../outside.txt',
      '../../tmp/outside.txt',
      'a/../../x',
      './../x',
      'a/b/../../../x',
      '%2e%2e/x',
      '%2E%2E%2Fx',
      '..%2Fx',
      '.%2e/x',
      '%2e%2e%2f%2e%2e%2ftmp%2foutside.txt',
      '%2Ftmp%2Foutside.txt',
      '/tmp/outside.txt',
      '//tmp/outside.txt',
      'a%00b',
      '%00',
      'x%00/../y',
      `${'n'.repeat(256)}`,
    ]
    for (const s of spellings) {
      for (const method of ['GET', 'PUT', 'DELETE']) {
        const r = await rawRequest(h.url, method, base + s, method === 'PUT' ? Buffer.from('pwned') : undefined)
        t.equal(`${r.status} ${r.json?.code}`, '400 invalid_path', `${method} files/${s}`)
      }
    }
    // Not UTF-8 once decoded: refused before routing.
    t.equal((await rawRequest(h.url, 'GET', `${base}%c0%ae%c0%ae/x`)).status, 400, 'overlong UTF-8 dots')
    for (const q of ['path=..', 'path=../..', 'path=%2e%2e', 'path=/tmp', 'path=a%00', 'path=x/../../tmp']) {
      const r = await rawRequest(h.url, 'GET', `/v1/sessions/${sid}/files?${q}`)
      t.equal(`${r.status} ${r.json?.code}`, '400 invalid_path', `listing ?${q}`)
    }
    t.equal(await python(h.url, sid, "import os\nprint(sorted(os.listdir('/tmp')))"), tmpBefore, 'nothing was written outside /workspace')
    t.equal(await python(h.url, sid, "print(open('/tmp/outside.txt').read())"), 'OUTSIDE\n')
  })

  t.test('names that only look like traversal stay inside /workspace', async (t) => {
    const base = `/v1/sessions/${sid}/files/`
    t.equal((await rawRequest(h.url, 'PUT', `${base}%252e%252e/double.txt`, Buffer.from('a'))).status, 201, 'double-encoded dots are a name')
    t.equal((await rawRequest(h.url, 'PUT', `${base}..%5Cback.txt`, Buffer.from('b'))).status, 201, 'a backslash is part of a name')
    t.equal((await rawRequest(h.url, 'PUT', `${base}...`, Buffer.from('c'))).status, 201, 'three dots are a name')
    t.equal(
      await python(h.url, sid, "import os\nprint(os.path.isfile('%2e%2e/double.txt'), os.path.isfile('..\\\\back.txt'), os.path.isfile('...'))"),
      'True True True\n',
    )
  })

  t.test('symlinks planted by sandbox code: refused when they lead outside, read or written through', async (t) => {
    await python(
      h.url,
      sid,
      `import os
for target, name in [('/etc', 'etc-link'), ('/etc/passwd', 'passwd'), ('/tmp', 'tmp-link'), ('/tmp/planted.txt', 'dangling'), ('/', 'root'), ('inside.txt', 'good-link'), ('../tmp', 'rel-out')]:
    os.symlink(target, name)`,
    )
    for (const path of ['etc-link/passwd', 'passwd', 'tmp-link/outside.txt', 'root/etc/hostname', 'rel-out/outside.txt']) {
      const r = await getFile(h.url, sid, path)
      t.equal(`${r.status} ${r.json?.code}`, '400 invalid_path', `GET ${path}`)
      t.notMatch(r.bytes.toString(), /root:|OUTSIDE/, 'and nothing of the file')
    }
    for (const path of ['tmp-link/new.txt', 'passwd', 'dangling', 'root/tmp/x.txt', 'rel-out/y.txt', 'tmp-link/outside.txt']) {
      const r = await putFile(h.url, sid, path, 'pwned')
      t.equal(`${r.status} ${r.json?.code}`, '400 invalid_path', `PUT ${path}`)
    }
    for (const q of ['path=tmp-link', 'path=root', 'path=etc-link']) t.match(await listFiles(h.url, sid, q), { status: 400, json: { code: 'invalid_path' } }, q)
    t.equal(await python(h.url, sid, "import os\nprint(sorted(os.listdir('/tmp')))"), tmpBefore, 'nothing was created outside')
    t.equal(await python(h.url, sid, "print(open('/tmp/outside.txt').read())"), 'OUTSIDE\n', 'nor overwritten')
    const listed = (await listFiles(h.url, sid, 'recursive=true')).json.files.map((f: any) => f.path)
    t.notOk(
      listed.some((p: string) => /link|passwd|dangling|root|rel-out|outside/.test(p)),
      'links are not listed, nor anything behind them',
    )

    t.equal((await getFile(h.url, sid, 'good-link')).bytes.toString(), 'inside', 'a link inside /workspace is followed')
    t.equal((await putFile(h.url, sid, 'good-link', 'rewritten')).json.path, 'inside.txt', 'and written through')
    t.equal((await deleteFile(h.url, sid, 'passwd')).status, 204, 'deleting a link deletes the link')
    t.equal((await deleteFile(h.url, sid, 'tmp-link', 'recursive=true')).status, 204)
    t.equal(
      await python(
        h.url,
        sid,
        "import os\nprint(os.path.lexists('passwd'), os.path.lexists('tmp-link'), os.path.exists('/etc/passwd'), open('/tmp/outside.txt').read())",
      ),
      'False False True OUTSIDE\n',
      'never what it points at',
    )
  })

  t.test('a symlink swapped in and out while the API walks the path never leads outside', async (t) => {
    const run = executeSse(
      h.url,
      sid,
      `import os, shutil, time
os.makedirs('/tmp/outside-dir', exist_ok=True)
open('/tmp/outside-dir/f', 'w').write('OUTSIDE')
os.makedirs('swap-real', exist_ok=True)
open('swap-real/f', 'w').write('INSIDE')
print('go', flush=True)
end = time.time() + 60
while time.time() < end and not os.path.exists('stop'):
    try:
        os.symlink('/tmp/outside-dir', 'swap'); os.unlink('swap')
        os.rename('swap-real', 'swap'); os.rename('swap', 'swap-real')
    except OSError:  # an upload created the folder 'swap' meanwhile (its parents are created)
        if os.path.islink('swap'): os.unlink('swap')
        elif not os.path.exists('swap-real'): os.rename('swap', 'swap-real')
        else: shutil.rmtree('swap', ignore_errors=True)`,
      { timeout_s: 90 },
    )
    t.ok(await waitFor(async () => (await api(h.url, 'GET', `/v1/sessions/${sid}`)).body.status === 'busy'), 'the swapping runs')
    const seen = new Set<string>()
    for (let i = 0; i < 40; i++) {
      const g = await getFile(h.url, sid, 'swap/f')
      seen.add(g.status === 200 ? `200 ${g.bytes.toString()}` : `${g.status} ${g.json?.code} ${g.json?.detail}`)
      const p = await putFile(h.url, sid, 'swap/g', 'pwned')
      seen.add(`PUT ${p.status} ${p.json?.code ?? ''} ${p.json?.detail}`)
    }
    await putFile(h.url, sid, 'stop', '')
    t.equal((await run).events.at(-1)?.data.status, 'ok')
    t.comment(`answers seen: ${[...seen].join(', ')}`)
    t.notOk(seen.has('200 OUTSIDE'), 'never read the file behind the link')
    const unclean = [...seen].filter((a) => !/^(200 INSIDE|PUT 20[01] |(PUT )?404 file_not_found |(PUT )?400 invalid_path )/.test(a))
    t.same(unclean, [], 'every answer is the file, or a clean 404 or 400 (the race is no server error)')
    t.equal(await python(h.url, sid, "import os\nprint(sorted(os.listdir('/tmp/outside-dir')))"), "['f']\n", 'never wrote behind the link')
  })

  t.test("another tenant's session is 404 for every file operation", async (t) => {
    for (const r of [
      await getFile(h.url, sid, 'inside.txt', OTHER_KEY),
      await putFile(h.url, sid, 'inside.txt', 'other tenant', { key: OTHER_KEY }),
      await deleteFile(h.url, sid, 'inside.txt', '', OTHER_KEY),
      await listFiles(h.url, sid, '', OTHER_KEY),
    ])
      t.equal(`${r.status} ${r.json?.code}`, '404 session_not_found')
    t.equal((await getFile(h.url, sid, 'inside.txt')).bytes.toString(), 'rewritten', 'the file is untouched')
  })

  t.test('special files are refused without blocking', async (t) => {
    await python(h.url, sid, "import os\nos.mkfifo('pipe')")
    const t0 = performance.now()
    t.match(await getFile(h.url, sid, 'pipe'), { status: 400, json: { code: 'invalid_path' } })
    t.ok(performance.now() - t0 < 10_000, 'answered at once')
  })

  t.test('a client that goes away mid-transfer leaves no process and no partial file behind', async (t) => {
    await putFile(h.url, sid, 'big.bin', randomBytes(16 * 1024 * 1024))
    const download = new AbortController()
    const res = await fetch(fileUrl(h.url, sid, 'big.bin'), { headers: { authorization: `Bearer ${API_KEY}` }, signal: download.signal })
    await res.body!.getReader().read()
    download.abort()
    const url = new URL(fileUrl(h.url, sid, 'half.bin'))
    const upload = request({
      host: url.hostname,
      port: url.port,
      method: 'PUT',
      path: url.pathname,
      headers: { authorization: `Bearer ${API_KEY}`, 'content-length': 16 << 20 },
    })
    upload.on('error', () => undefined)
    upload.write(randomBytes(4 << 20))
    const temps = `import os\nprint(sum(n.startswith('.replcast-upload-') for _, _, ns in os.walk('.') for n in ns))`
    t.ok(await waitFor(async () => (await python(h.url, sid, temps)) === '1\n'), 'the upload is under way')
    upload.destroy()
    const leftovers = `${LIST_PROCESSES}
temps = [n for _, _, ns in os.walk('.') for n in ns if n.startswith('.replcast-upload-')]
print(sum(b'fileio.py' in c for c in procs), len(temps), os.path.exists('half.bin'))`
    t.ok(await waitFor(async () => (await python(h.url, sid, leftovers)) === '0 0 False\n', 30_000), 'no file program, temporary file or half.bin is left')
  })

  t.test('the file program runs as the sandbox user, without privileges', async (t) => {
    const p = await startInSandbox(docker, await containerOf(sid), {
      cmd: ['cat', '/proc/self/status'],
      user: h.config.SANDBOX_USER,
      workdir: '/workspace',
      timeoutMs: 30_000,
    })
    const lines: string[] = []
    for (let l = await readLine(p.stdout, 65536); l !== null; l = await readLine(p.stdout, 65536)) lines.push(l)
    const field = (name: string) => lines.find((l) => l.startsWith(`${name}:`))?.split(/\s+/)[1]
    t.equal(field('Uid'), '1000')
    t.equal(field('NoNewPrivs'), '1')
    t.equal(field('CapEff'), '0000000000000000')
    t.equal(field('CapBnd'), '0000000000000000')
  })

  t.test('a dead sandbox answers 409 session_dead', async (t) => {
    const dead = await createSession(h.url)
    await docker.getContainer(await containerOf(dead)).kill()
    t.ok(await waitFor(async () => (await api(h.url, 'GET', `/v1/sessions/${dead}`)).body.status === 'dead'), 'the session is dead')
    t.match(await getFile(h.url, dead, 'x'), { status: 409, json: { code: 'session_dead' } })
    t.match(await putFile(h.url, dead, 'x', 'y'), { status: 409, json: { code: 'session_dead' } })
  })
})

t.test('uploads larger than the workspace or the file limit: 413, the workspace as it was', async (t) => {
  const h = await startApp(t, { SANDBOX_POOL_SIZE: '0', MAX_FILE_BYTES: String(12 * 1024 * 1024) })
  const sid = await createSession(h.url, { limits: { workspace_mb: 8 } })
  const keep = randomBytes(5 * 1024 * 1024)
  t.equal((await putFile(h.url, sid, 'keep.bin', keep)).status, 201)
  const before = await python(h.url, sid, WORKSPACE_STATE)
  const streamed = (size: number) =>
    new ReadableStream<Uint8Array>({
      start(c) {
        for (let o = 0; o < size; o += 256 * 1024) c.enqueue(randomBytes(Math.min(256 * 1024, size - o)))
        c.close()
      },
    })

  const declared = await putFile(h.url, sid, 'huge.bin', randomBytes(10 * 1024 * 1024))
  t.equal(`${declared.status} ${declared.json?.code}`, '413 workspace_full', 'a content-length past the workspace is refused at once')
  const replacing = await fileRequest('PUT', fileUrl(h.url, sid, 'keep.bin'), streamed(6 * 1024 * 1024))
  t.equal(`${replacing.status} ${replacing.json?.code}`, '413 workspace_full', 'a streamed body that fills the disk is refused')
  const fresh = await fileRequest('PUT', fileUrl(h.url, sid, 'new/deep/file.bin'), streamed(4 * 1024 * 1024))
  t.equal(`${fresh.status} ${fresh.json?.code}`, '413 workspace_full')
  t.ok((await getFile(h.url, sid, 'keep.bin')).bytes.equals(keep), 'the replaced file keeps its old bytes')
  t.equal(await python(h.url, sid, WORKSPACE_STATE), before, 'no file, folder, temporary file or block changed')
  t.equal((await putFile(h.url, sid, 'fits.bin', randomBytes(2 * 1024 * 1024))).status, 201, 'the space is free again')

  const big = await createSession(h.url, { limits: { workspace_mb: 64 } })
  const limit = await putFile(h.url, big, 'big.bin', randomBytes(13 * 1024 * 1024))
  t.equal(`${limit.status} ${limit.json?.code}`, '413 payload_too_large', 'past MAX_FILE_BYTES, declared')
  const limitStreamed = await fileRequest('PUT', fileUrl(h.url, big, 'big.bin'), streamed(13 * 1024 * 1024))
  t.equal(`${limitStreamed.status} ${limitStreamed.json?.code}`, '413 payload_too_large', 'past MAX_FILE_BYTES, streamed')
  t.match(await getFile(h.url, big, 'big.bin'), { status: 404 }, 'nothing was written')
})
