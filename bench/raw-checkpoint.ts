// The raw baseline of issue 34's figures: a container of the sandbox image with a sandbox's flags
// (src/sandbox/container-spec.ts, runsc) running a bare Python loop instead of replcast's REPL, put
// in the same state through its stdin, then `docker checkpoint create` (the container exits) and
// `docker start --checkpoint` through dockerode, with nothing of replcast in between. runsc refuses to
// start the checkpointed container again ("id already in use"), so, as replcast does, the checkpoint
// is hard-linked into a new container's checkpoints/ folder and that one is started from it.
import Docker from 'dockerode'
import { execFileSync } from 'node:child_process'
import { mkdir, readdir, stat, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { PassThrough } from 'node:stream'
import { containerConfig } from '../src/sandbox/container-spec.js'
import { LABEL } from '../src/sandbox/labels.js'
import { benchSpec } from './raw-docker.js'

const docker = new Docker()
/** Runs each line of stdin as Python (newlines escaped as \n) and prints "ok" after it. */
const LOOP = "import sys\nfor line in sys.stdin:\n    exec(line.replace('\\\\n', '\\n'), globals())\n    print('ok', flush=True)\n"

export interface RawPython {
  /** Runs `code` and answers when its "ok" came back. */
  run(code: string): Promise<void>
  /** Checkpoints it (the container exits); ms until Docker says it is not running. */
  checkpoint(): Promise<number>
  /**
   * Starts a new container from its last checkpoint and runs print(1): ms of the start call alone,
   * and from the new container's create until the 1 came back (create, checkpoint placed, attach, start, print).
   */
  restore(): Promise<{ startMs: number; firstOutputMs: number }>
  /** Bytes of its last checkpoint on disk (the engine's own folder). */
  checkpointBytes(): Promise<number>
  remove(): Promise<void>
}

interface Attached {
  sock: NodeJS.ReadWriteStream & { destroy(): void }
  /** Resolves with performance.now() when the next stdout line arrives, and with that line. */
  nextLine(): Promise<{ at: number; line: string }>
}

async function attach(c: Docker.Container): Promise<Attached> {
  const sock = (await c.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true })) as unknown as Attached['sock']
  const out = new PassThrough()
  docker.modem.demuxStream(sock, out, new PassThrough())
  const lines: Array<{ at: number; line: string }> = []
  let waiter: (() => void) | null = null
  let buf = ''
  out.on('data', (b: Buffer) => {
    buf += b.toString()
    let i
    while ((i = buf.indexOf('\n')) !== -1) {
      lines.push({ at: performance.now(), line: buf.slice(0, i) })
      buf = buf.slice(i + 1)
    }
    if (lines.length) waiter?.()
  })
  return {
    sock,
    async nextLine() {
      while (!lines.length) await new Promise<void>((r) => (waiter = r))
      return lines.shift()!
    },
  }
}

const escape = (code: string) => code.replace(/\n/g, '\\n') + '\n'

async function untilOk(a: Attached): Promise<void> {
  for (;;) if ((await a.nextLine()).line === 'ok') return
}

/** Starts the loop in a container with a runsc sandbox's flags and `memoryMb`, labelled with `deployment` only. */
export async function startRawPython(deployment: string, memoryMb: number): Promise<RawPython> {
  // Unnamed: the next container takes over while the last one still exists.
  const { name: _unused, ...config } = containerConfig({ ...benchSpec(deployment, 'runsc'), memoryMb })
  const create = () => docker.createContainer({ ...config, Cmd: ['python3', '-u', '-c', LOOP], Labels: { [LABEL.deployment]: deployment } })
  let container = await create()
  let io = await attach(container)
  await container.start()
  let round = 0
  const name = () => `raw-${round}`
  const info = (await docker.info()) as { DockerRootDir?: string }
  const folder = (id: string) => join(info.DockerRootDir ?? '/var/lib/docker', 'containers', id, 'checkpoints', name())
  return {
    async run(code) {
      io.sock.write(escape(code))
      await untilOk(io)
    },
    async checkpoint() {
      round++
      const t0 = performance.now()
      // dockerode has the call, its types do not.
      await (container as unknown as { createCheckpoint(o: object): Promise<unknown> }).createCheckpoint({ CheckpointID: name(), Exit: true })
      await container.wait({ condition: 'not-running' })
      const ms = performance.now() - t0
      io.sock.destroy()
      return ms
    },
    async restore() {
      const old = container
      const t0 = performance.now()
      const next = await create()
      await mkdir(dirname(folder(next.id)), { recursive: true, mode: 0o700 })
      execFileSync('cp', ['-al', folder(old.id), folder(next.id)])
      // Docker uploads the folder to containerd by its digest: each copy must differ (as replcast's do).
      await writeFile(join(folder(next.id), 'raw-restore'), next.id)
      io = await attach(next)
      const s0 = performance.now()
      await next.start({ _query: { checkpoint: name() }, _body: {} } as object)
      const started = performance.now()
      io.sock.write(escape('print(1)'))
      const first = await io.nextLine()
      if (first.line !== '1') throw new Error(`the restored loop printed ${JSON.stringify(first.line)}, not 1`)
      await untilOk(io)
      container = next
      await old.remove({ force: true })
      return { startMs: started - s0, firstOutputMs: first.at - t0 }
    },
    async checkpointBytes() {
      return folderBytes(folder(container.id))
    },
    async remove() {
      io.sock.destroy()
      await container.remove({ force: true }).catch(() => undefined)
    },
  }
}

/** Bytes of the files under `dir` (a checkpoint's size as replcast counts it: its files' lengths). */
export async function folderBytes(dir: string): Promise<number> {
  let n = 0
  for (const e of await readdir(dir, { withFileTypes: true, recursive: true })) if (e.isFile()) n += (await stat(join(e.parentPath, e.name))).size
  return n
}
