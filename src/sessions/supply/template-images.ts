// The sandbox templates a request may name, and whether each one's image can run a sandbox: a fast
// look at the image (present, command runs the replcast REPL) before a container is made, and the
// error to give when a sandbox of it never says ready.
import type { Logger } from 'pino'
import type { Config } from '../../config.js'
import { AppError } from '../../errors.js'
import type { SandboxDriver } from '../../sandbox/driver.js'
import { DEFAULT_TEMPLATE } from '../../templates.js'

/** The package every template's command must run (the sandbox image's CMD runs replcast_repl.server's main). */
const REPL_MODULE = 'replcast_repl'
/** How long an image found unusable stays refused before it is looked at again (it may be rebuilt). */
const RECHECK_BAD_MS = 5000

export interface TemplateInfo {
  name: string
  image: string
  default: boolean
}

export class TemplateImages {
  /** Images found usable (kept), and unusable ones with when to look again. */
  private readonly good = new Set<string>()
  private readonly bad = new Map<string, { error: AppError; until: number }>()

  constructor(
    private readonly config: Config,
    private readonly driver: Pick<SandboxDriver, 'imageFacts'>,
    private readonly log: Logger,
  ) {}

  list(): TemplateInfo[] {
    return [...this.config.templates].map(([name, image]) => ({ name, image, default: name === DEFAULT_TEMPLATE }))
  }

  /** The template's image. Throws unknown_template (400) naming the ones there are. */
  image(name: string): string {
    const image = this.config.templates.get(name)
    if (image === undefined)
      throw new AppError(
        'unknown_template',
        `no template ${JSON.stringify(name)}; GET /v1/templates lists them: ${[...this.config.templates.keys()].join(', ')}`,
      )
    return image
  }

  /** Throws unknown_template, or template_unusable when its image is missing or does not run the REPL. */
  async check(name: string): Promise<string> {
    const image = this.image(name)
    if (this.good.has(image)) return image
    const bad = this.bad.get(image)
    if (bad && bad.until > Date.now()) throw bad.error
    let facts: Awaited<ReturnType<SandboxDriver['imageFacts']>>
    try {
      facts = await this.driver.imageFacts(image)
    } catch (err) {
      throw new AppError('sandbox_failed', 'the Docker engine could not be asked about the template image', { cause: err })
    }
    const why = !facts
      ? `its image ${image} is not on the Docker engine (build it, or fix SANDBOX_TEMPLATES)`
      : facts.command.join(' ').includes(REPL_MODULE)
        ? null
        : `its image ${image} runs ${JSON.stringify(facts.command.join(' ') || '(nothing)')}; build it FROM replcast-sandbox and keep its CMD`
    if (why) {
      const error = new AppError('template_unusable', `template ${name}'s image does not run the replcast REPL: ${why}`)
      this.bad.set(image, { error, until: Date.now() + RECHECK_BAD_MS })
      this.log.error({ template: name, image }, error.message)
      throw error
    }
    this.bad.delete(image)
    this.good.add(image)
    return image
  }

  /** Looks at every template's image once at start, so an operator sees a bad one in the log at once. */
  async checkAll(): Promise<void> {
    for (const { name } of this.list()) await this.check(name).catch(() => undefined)
  }

  /**
   * The error for a sandbox of `name` whose REPL never said ready (its container exited, or the
   * start timeout passed): the image passed the fast check, so its REPL does not start.
   */
  notReady(name: string, cause: unknown): AppError {
    const image = this.config.templates.get(name) ?? '?'
    this.good.delete(image)
    return new AppError(
      'template_unusable',
      `template ${name}'s image does not run the replcast REPL: a sandbox of ${image} exited or did not say ready within ${this.config.SANDBOX_START_TIMEOUT_MS} ms`,
      { cause },
    )
  }
}
