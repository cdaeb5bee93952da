// Builds a small Docker image for a test (a template, or a deliberately broken sandbox image) from
// local images only, and removes it at teardown.
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import type { Test } from 'tap'

const run = promisify(execFile)

/** `docker build` of `dockerfile` with `files` (name → content) as its context; returns the tag. */
export async function buildImage(t: Test, name: string, dockerfile: string, files: Record<string, string> = {}): Promise<string> {
  const tag = `replcast-test-${name}:${randomBytes(4).toString('hex')}`
  const dir = await mkdtemp(join(tmpdir(), 'replcast-image-'))
  try {
    await writeFile(join(dir, 'Dockerfile'), dockerfile)
    for (const [file, content] of Object.entries(files)) await writeFile(join(dir, file), content)
    // --pull=false: the bases are local (no registry is reachable from the tests).
    await run('docker', ['build', '--pull=false', '-q', '-t', tag, dir], { timeout: 120_000 })
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
  t.teardown(() =>
    run('docker', ['image', 'rm', '-f', tag]).then(
      () => undefined,
      () => undefined,
    ),
  )
  return tag
}
