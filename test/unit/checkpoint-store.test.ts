// The checkpoint store on a plain folder: owner-only files, a checksum that catches a changed, a
// truncated, an added or a missing file, and a sweep that spares young folders and named sessions.
import t, { type Test } from 'tap'
import { appendFileSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, statSync, truncateSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { CheckpointMismatch, CheckpointStore } from '../../src/sessions/supply/index.js'

function store(t: Test): CheckpointStore {
  const dir = mkdtempSync(join(tmpdir(), 'rc-store-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return new CheckpointStore(join(dir, 'checkpoints'))
}

/** What a runtime writes: an image and a folder of more. */
async function written(s: CheckpointStore, sid: string): Promise<string> {
  const part = await s.partDir(sid)
  mkdirSync(join(part, 'more'), { recursive: true })
  writeFileSync(join(part, 'checkpoint.img'), Buffer.alloc(4096, 7))
  writeFileSync(join(part, 'more', 'pages'), 'pages')
  return part
}

t.test('seal makes it owner-only, names it after the session, and sums it', async (t) => {
  const s = store(t)
  const sealed = await s.seal(await written(s, 'ses_a'), 'ses_a')
  t.match(sealed.digest, /^sha256:[0-9a-f]{64}$/)
  t.equal(sealed.bytes, 4096 + 5)
  t.same(readdirSync(s.root), ['ses_a'], 'the part folder was renamed')
  t.equal(statSync(s.root).mode & 0o777, 0o700)
  t.equal(statSync(s.dir('ses_a')).mode & 0o777, 0o700)
  t.equal(statSync(join(s.dir('ses_a'), 'checkpoint.img')).mode & 0o777, 0o600)
  t.equal(statSync(join(s.dir('ses_a'), 'more', 'pages')).mode & 0o777, 0o600)
  await s.verify('ses_a', sealed.digest)
  const again = await s.seal(await written(s, 'ses_b'), 'ses_b')
  t.equal(again.digest, sealed.digest, 'the same files give the same digest')
})

const tampers: Array<[string, (dir: string) => void]> = [
  ['a changed byte', (d) => writeFileSync(join(d, 'checkpoint.img'), Buffer.alloc(4096, 8))],
  ['a byte more', (d) => appendFileSync(join(d, 'checkpoint.img'), 'x')],
  ['a truncated file', (d) => truncateSync(join(d, 'checkpoint.img'), 100)],
  ['a missing file', (d) => unlinkSync(join(d, 'more', 'pages'))],
  ['an added file', (d) => writeFileSync(join(d, 'extra'), '')],
  ['a renamed file', (d) => renameSync(join(d, 'more', 'pages'), join(d, 'more', 'Pages'))],
  ['no folder at all', (d) => rmSync(d, { recursive: true })],
]
for (const [what, tamper] of tampers) {
  t.test(`verify refuses ${what}`, async (t) => {
    const s = store(t)
    const { digest } = await s.seal(await written(s, 'ses_a'), 'ses_a')
    tamper(s.dir('ses_a'))
    await t.rejects(s.verify('ses_a', digest), CheckpointMismatch)
  })
}

t.test('verify refuses an empty digest, and a session id that is not a plain name', async (t) => {
  const s = store(t)
  await s.seal(await written(s, 'ses_a'), 'ses_a')
  await t.rejects(s.verify('ses_a', ''), CheckpointMismatch)
  t.throws(() => s.dir('../etc'))
})

t.test('the sweep removes old folders no session names, and spares young ones', async (t) => {
  const s = store(t)
  await s.seal(await written(s, 'ses_kept'), 'ses_kept')
  await s.seal(await written(s, 'ses_orphan'), 'ses_orphan')
  const half = await written(s, 'ses_kept')
  await s.seal(await written(s, 'ses_young'), 'ses_young')
  const old = new Date(Date.now() - 3600_000)
  for (const name of ['ses_kept', 'ses_orphan']) utimesSync(s.dir(name), old, old)
  utimesSync(half, old, old)
  const removed = await s.sweep(async (sid) => sid === 'ses_kept')
  t.same(removed.sort(), ['ses_orphan', half.split('/').at(-1)!].sort())
  t.same(readdirSync(s.root).sort(), ['ses_kept', 'ses_young'])
  t.same(await s.usage(), { checkpoints: 2, bytes: 2 * (4096 + 5) })
})
