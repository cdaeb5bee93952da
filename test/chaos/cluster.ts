// The chaos soak's service: API instances (real src/server.ts processes) on a private redis-server
// the soak may SIGKILL or SIGSTOP, with one key prefix and one Docker deployment label. Each
// instance keeps its port and REPLCAST_INSTANCE_ID across restarts; its output goes to a log file.
import { execFile, spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { createWriteStream, mkdirSync, rmSync, symlinkSync, type WriteStream } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'
import { removeDeployment, testEnv } from '../helpers/app.js'
import { startPrivateRedis, type PrivateRedis } from '../helpers/private-redis.js'
import { freePort } from '../helpers/server-process.js'
import { waitFor } from '../helpers/wait.js'

/**
 * How an instance runs: `dist`, compiled first as npm start does (it starts in about a second, so an
 * instance SIGKILLed and started again can be back while a survivor takes its sessions over); `src`,
 * the TypeScript source through this process's loader as tests run it (no build, but a start takes
 * several seconds on a busy machine).
 */
export type ServerBuild = 'src' | 'dist'
const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const START_TIMEOUT_MS = 30_000

/**
 * Compiles src/ into `dir`/dist; returns the server's script. `dir` is under the repository, so that
 * its imports find node_modules, and holds a link to src/, where the build finds the playground's files.
 */
async function compile(dir: string): Promise<string> {
  mkdirSync(dir, { recursive: true })
  symlinkSync(join(ROOT, 'src'), join(dir, 'src'))
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc')
  await promisify(execFile)(process.execPath, [tsc, '-p', join(ROOT, 'tsconfig.json'), '--outDir', join(dir, 'dist'), '--sourceMap', 'false'])
  return join(dir, 'dist', 'server.js')
}

export type InstanceState = 'up' | 'starting' | 'down' | 'frozen'

export class Instance {
  state: InstanceState = 'down'
  child: ChildProcess | null = null
  /** Exit codes (or signals) of its processes, in order. */
  readonly exits: string[] = []
  private readonly log: WriteStream

  constructor(
    readonly index: number,
    readonly id: string,
    readonly url: string,
    private readonly env: Record<string, string>,
    /** node's arguments: the server's script, after any loader flags. */
    private readonly args: string[],
    logPath: string,
  ) {
    this.log = createWriteStream(logPath, { flags: 'a' })
  }

  /** Starts a process (again) and waits until /healthz answers; retried while it exits early (Redis away). */
  async start(): Promise<void> {
    this.state = 'starting'
    const end = Date.now() + 4 * START_TIMEOUT_MS
    while (Date.now() < end) {
      this.log.write(`--- chaos: starting ${this.id} at ${new Date().toISOString()}\n`)
      const child = spawn(process.execPath, this.args, { env: { ...process.env, ...this.env }, stdio: ['ignore', 'pipe', 'pipe'] })
      this.child = child
      child.stdout.pipe(this.log, { end: false })
      child.stderr.pipe(this.log, { end: false })
      child.once('exit', (code, signal) => {
        this.exits.push(String(code ?? signal))
        this.log.write(`--- chaos: ${this.id} exited ${code ?? signal} at ${new Date().toISOString()}\n`)
      })
      const t0 = performance.now()
      const healthy = async () => child.exitCode !== null || (await fetch(`${this.url}/healthz`).catch(() => null))?.ok === true
      if ((await waitFor(healthy, START_TIMEOUT_MS, 50)) && child.exitCode === null) {
        this.log.write(`--- chaos: ${this.id} up after ${((performance.now() - t0) / 1000).toFixed(1)} s\n`)
        this.state = 'up'
        return
      }
      await this.kill()
      await new Promise((r) => setTimeout(r, 1000))
    }
    throw new Error(`instance ${this.id} did not start (see its log)`)
  }

  /** Sends `signal` and waits for the process to exit. */
  async stop(signal: 'SIGKILL' | 'SIGTERM'): Promise<string> {
    const child = this.child
    if (!child || child.exitCode !== null || child.signalCode !== null) return 'gone'
    this.state = 'down'
    const exited = new Promise<string>((r) => child.once('exit', (code, sig) => r(String(code ?? sig))))
    if (signal === 'SIGTERM') child.kill('SIGCONT')
    child.kill(signal)
    return exited
  }

  kill(): Promise<string> {
    return this.stop('SIGKILL')
  }

  freeze(): void {
    this.state = 'frozen'
    this.child?.kill('SIGSTOP')
  }

  thaw(): void {
    this.child?.kill('SIGCONT')
    if (this.state === 'frozen') this.state = 'up'
  }

  close(): void {
    this.log.end()
  }
}

export interface ClusterOptions {
  instances: number
  /** Extra environment for every instance. */
  env: Record<string, string>
  build: ServerBuild
  /** Where the instances' logs go. */
  logDir: string
}

export class Cluster {
  private turn = 0

  private constructor(
    readonly redis: PrivateRedis,
    readonly prefix: string,
    readonly deployment: string,
    readonly instances: Instance[],
    private readonly buildDir: string | null,
  ) {}

  static async start(opts: ClusterOptions): Promise<Cluster> {
    mkdirSync(opts.logDir, { recursive: true })
    const tag = randomBytes(4).toString('hex')
    const buildDir = opts.build === 'dist' ? join(ROOT, '.replcast', `chaos-build-${tag}`) : null
    const script = buildDir
      ? await compile(buildDir).catch((err: unknown) => {
          rmSync(buildDir, { recursive: true, force: true })
          throw err
        })
      : null
    const redis = await startPrivateRedis()
    const prefix = `replcast-chaos-${tag}:`
    const deployment = `chaos-${tag}`
    const args = script ? [script] : [...process.execArgv, join(ROOT, 'src', 'server.ts')]
    const instances: Instance[] = []
    for (let i = 0; i < opts.instances; i++) {
      const id = `chaos${i}-${tag}`
      const port = await freePort()
      const env = testEnv({
        REDIS_URL: redis.url,
        REPLCAST_KEY_PREFIX: prefix,
        REPLCAST_DEPLOYMENT: deployment,
        REPLCAST_INSTANCE_ID: id,
        PORT: String(port),
        LOG_LEVEL: 'warn',
        ...opts.env,
      })
      instances.push(new Instance(i, id, `http://127.0.0.1:${port}`, env, args, join(opts.logDir, `${id}.log`)))
    }
    const c = new Cluster(redis, prefix, deployment, instances, buildDir)
    try {
      for (const inst of instances) await inst.start()
    } catch (err) {
      await c.destroy()
      throw err
    }
    return c
  }

  /** The next instance's URL, round-robin over all of them, as a plain balancer does (down ones too). */
  next(): string {
    return this.instances[this.turn++ % this.instances.length]!.url
  }

  /** A connection of the soak's own to Redis (for its checks; the caller disconnects it). */
  admin(): Redis {
    return new Redis(this.redis.url, { maxRetriesPerRequest: 2 })
  }

  /** The redis-server's process id (to SIGSTOP it), from Redis itself. */
  async redisPid(): Promise<number> {
    const r = new Redis(this.redis.url, { maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 2000, lazyConnect: true })
    r.on('error', () => undefined)
    try {
      await r.connect()
      return Number(/process_id:(\d+)/.exec(await r.info('server'))?.[1] ?? 0)
    } finally {
      r.disconnect()
    }
  }

  /** How many of `sids` each instance holds (by instance id), from their leases; empty when Redis does not answer at once. */
  async holders(sids: string[]): Promise<Map<string, number>> {
    const out = new Map<string, number>()
    const r = new Redis(this.redis.url, { maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 1000, commandTimeout: 1000, lazyConnect: true })
    r.on('error', () => undefined)
    try {
      await r.connect()
      for (const id of await r.mget(sids.map((sid) => `${this.prefix}{${sid}}:lease`))) if (id) out.set(id, (out.get(id) ?? 0) + 1)
    } catch {
      /* Redis away or paused: no preference */
    } finally {
      r.disconnect()
    }
    return out
  }

  /** SIGKILLs whatever is left and removes every container and file it made. */
  async destroy(): Promise<void> {
    await Promise.all(this.instances.map((i) => i.kill()))
    for (const i of this.instances) i.close()
    await removeDeployment(this.deployment)
    await this.redis.destroy()
    if (this.buildDir) rmSync(this.buildDir, { recursive: true, force: true })
  }
}
