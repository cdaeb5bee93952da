// A second Docker engine on this machine, beside the first, for tests of several hosts: its own
// dockerd (socket, exec root and pid file in a temporary directory; bridge and iptables off; the
// first engine's runtimes, runsc included) with the sandbox image loaded. Its data root is kept in
// .replcast/engine2 between runs, so the image is loaded again only when its id changed. The engine
// id (`docker info`) comes from /etc/docker/key.json: the second dockerd runs in a mount namespace
// of its own where /etc/docker is .replcast/engine2/etc, so it gets an id of its own. stop() removes
// every container on it and stops it; the kernel kills it too if the test process dies first.
// With `experimental` it can checkpoint (Docker's experimental mode, live-restore on), and restart()
// stops its dockerd and starts it again on the same socket and data root (a dockerd restart).
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import Docker from 'dockerode'
import { waitFor } from './wait.js'

const STATE = process.env.REPLCAST_STATE ?? fileURLToPath(new URL('../../.replcast', import.meta.url))
const IMAGE = process.env.SANDBOX_IMAGE ?? 'replcast-sandbox:latest'

export interface SecondEngine {
  /** DOCKER_HOST for an instance on it. */
  host: string
  docker: Docker
  /** Its `docker info` ID (the first engine's differs). */
  id: string
  /** Removes its containers and stops it (waits for the exit). */
  stop(): Promise<void>
  /** Stops its dockerd (SIGTERM, containers left as they are) and starts it again; resolves once it answers. */
  restart(): Promise<void>
}

export interface SecondEngineOptions {
  /** Docker's experimental mode (checkpoints) and live-restore. */
  experimental?: boolean
}

export async function startSecondEngine(opts: SecondEngineOptions = {}): Promise<SecondEngine> {
  const first = new Docker()
  const dataRoot = join(STATE, 'engine2')
  const etc = join(dataRoot, 'etc')
  mkdirSync(etc, { recursive: true })
  // Unix socket paths must stay short: a directory right under /tmp.
  const run = mkdtempSync('/tmp/rc-e2-')
  const sock = join(run, 'docker.sock')
  const info = (await first.info()) as { Runtimes?: Record<string, { path: string; runtimeArgs?: string[] }> }
  const runtimes = Object.fromEntries(Object.entries(info.Runtimes ?? {}).filter(([name]) => name !== 'runc' && !name.startsWith('io.containerd.')))
  writeFileSync(join(run, 'daemon.json'), JSON.stringify({ runtimes, ...(opts.experimental ? { experimental: true, 'live-restore': true } : {}) }))
  const args = [
    '--config-file',
    join(run, 'daemon.json'),
    '-H',
    `unix://${sock}`,
    '--data-root',
    dataRoot,
    '--exec-root',
    join(run, 'exec'),
    '--pidfile',
    join(run, 'docker.pid'),
    '--bridge',
    'none',
    '--iptables=false',
    '--ip-masq=false',
    '--log-level',
    'warn',
  ]
  let log = ''
  const launch = () => {
    const child: ChildProcess = spawn(
      'setpriv',
      [
        '--pdeathsig',
        'KILL',
        'unshare',
        '-m',
        // Its own network namespace: a dockerd with `--bridge none` deletes the host's docker0 at start,
        // which would leave the first engine unable to `docker build`.
        '-n',
        '--propagation',
        'private',
        'sh',
        '-c',
        'ip link set lo up && mount --bind "$1" /etc/docker && shift && exec dockerd "$@"',
        'sh',
        etc,
        ...args,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    )
    child.stdout!.on('data', (b) => (log = (log + b).slice(-4000)))
    child.stderr!.on('data', (b) => (log = (log + b).slice(-4000)))
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
    return { child, exited }
  }
  let { child, exited } = launch()
  const docker = new Docker({ socketPath: sock })
  const endDockerd = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), 20000)
      await exited
      clearTimeout(timer)
    }
  }
  const stopEngine = async () => {
    await endDockerd()
    rmSync(run, { recursive: true, force: true })
  }
  const answers = async () => {
    const up = await waitFor(
      async () => {
        if (child.exitCode !== null) return true
        try {
          await docker.ping()
          return true
        } catch {
          return false
        }
      },
      60000,
      100,
    )
    if (!up || child.exitCode !== null) throw new Error(`the second dockerd did not start: ${log}`)
  }
  try {
    await answers()
    await loadImage(first, docker)
    const id = ((await docker.info()) as { ID: string }).ID
    return {
      host: `unix://${sock}`,
      docker,
      id,
      async stop() {
        const left = await docker.listContainers({ all: true }).catch(() => [])
        await Promise.all(
          left.map((c) =>
            docker
              .getContainer(c.Id)
              .remove({ force: true, v: true })
              .catch(() => undefined),
          ),
        )
        await stopEngine()
      },
      async restart() {
        await endDockerd()
        ;({ child, exited } = launch())
        await answers()
      },
    }
  } catch (err) {
    await stopEngine()
    throw err
  }
}

/** Loads the first engine's sandbox image into the second unless it already has that very image. */
async function loadImage(from: Docker, to: Docker): Promise<void> {
  const want = (await from.getImage(IMAGE).inspect()).Id
  const have = await to
    .getImage(IMAGE)
    .inspect()
    .then((i) => i.Id)
    .catch(() => '')
  if (have === want) return
  const tar = await from.getImage(IMAGE).get()
  const progress = await to.loadImage(tar, { quiet: true })
  await new Promise<void>((resolve, reject) => to.modem.followProgress(progress, (err: Error | null) => (err ? reject(err) : resolve())))
  const loaded = (await to.getImage(IMAGE).inspect()).Id
  if (loaded !== want) throw new Error(`the second engine has ${loaded} as ${IMAGE}, not ${want}`)
}
