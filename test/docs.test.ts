// The docs stay true to the code: the configuration tables of docs/configuration.md, the README's two
// commands, links between the pages, and docker-compose.yml.
import t from 'tap'
import { existsSync } from 'node:fs'
import { readFile, readdir } from 'node:fs/promises'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parse } from 'yaml'
import { withConfigTable } from '../src/config-docs.js'
import { TenantLimitsOverride, parseTenantLimits, type TenantDefaultsSource } from '../src/tenants.js'

const root = new URL('..', import.meta.url)
const rootPath = fileURLToPath(root)
const read = (path: string) => readFile(new URL(path, root), 'utf8')

t.test('docs/configuration.md lists every configuration variable with its default (run `npm run docs`)', async (t) => {
  const page = await read('docs/configuration.md')
  t.equal(page, withConfigTable(page))
})

t.test("docs/configuration.md's per-tenant table names every override key and the variable that is its default", async (t) => {
  const page = await read('docs/configuration.md')
  const section = page.slice(page.indexOf('## Per-tenant limits'))
  // | `key` | `VARIABLE` | what it bounds |
  const rows = [...section.matchAll(/^\| `([a-z_]+)` \| `([A-Z_]+)` \|/gm)].map((m) => [m[1]!, m[2]!] as const)
  t.same(rows.map(([key]) => key).sort(), Object.keys(TenantLimitsOverride.properties).sort(), 'one row per override key')
  // Give every default variable a value of its own, then see which one each key resolves to.
  const variables = rows.map(([, variable]) => variable)
  const config = Object.fromEntries(variables.map((v, i) => [v, 1000 + i])) as unknown as TenantDefaultsSource
  const limits = parseTenantLimits('', config).for('anyone') as Record<string, number>
  for (const [key, variable] of rows) t.equal(limits[key], config[variable as keyof TenantDefaultsSource], `${key} defaults to ${variable}`)
})

t.test('README names the two commands, what npm test ends with, and .ci/run calls the test command', async (t) => {
  const readme = await read('README.md')
  t.match(readme, /^npm start +#/m)
  t.match(readme, /^npm test +#.*ends with "N passed, N failed"/m)
  const ci = await read('.ci/run')
  t.match(ci, /npm test/)
})

/** GitHub's anchor for a heading: lower case, markup and punctuation gone, spaces as hyphens. */
function slug(heading: string): string {
  const text = heading.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/`/g, '')
  return text
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-')
}

/** The anchors of a page's headings, outside code blocks; a repeated heading gets -1, -2, ... */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>()
  const out = new Set<string>()
  for (const line of withoutFences(markdown).split('\n')) {
    const m = /^#{1,6} +(.*?) *#*$/.exec(line)
    if (!m) continue
    const base = slug(m[1]!)
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    out.add(n === 0 ? base : `${base}-${n}`)
  }
  return out
}

/** The page without its fenced blocks, whose lines are examples, not headings or links. */
function withoutFences(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```/gm, '')
}

/** The page without fenced blocks or inline code, so examples are not read as links. */
function withoutCode(markdown: string): string {
  return withoutFences(markdown).replace(/`[^`\n]*`/g, '``')
}

const pages = async (): Promise<string[]> => [
  'README.md',
  ...(await readdir(new URL('docs/', root))).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`),
  'clients/typescript/README.md',
  'clients/python/README.md',
  'sandbox-image/README.md',
]

t.test('every relative link in the README and the docs leads to a file inside the repository, and an #anchor to a heading', async (t) => {
  const files = await pages()
  t.ok(files.length > 6, 'the README and the docs pages are found')
  let links = 0
  for (const page of files) {
    const text = await read(page)
    for (const [, target] of withoutCode(text).matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/i.test(target!)) continue // http:, https:, mailto:
      const [path, anchor] = target!.split('#') as [string, string | undefined]
      const file = path === '' ? join(rootPath, page) : join(rootPath, dirname(page), decodeURIComponent(path))
      const where = `${page} → ${target}`
      links++
      if (relative(rootPath, file).startsWith('..')) {
        t.fail(`${where} leads outside the repository`)
        continue
      }
      if (!existsSync(file)) {
        t.fail(`${where}: no such file`)
        continue
      }
      if (anchor !== undefined && file.endsWith('.md')) {
        t.ok(anchors(await readFile(file, 'utf8')).has(anchor), `${where}: a heading with that anchor`)
      }
    }
  }
  t.ok(links > 50, `the pages' links are read (${links})`)
})

t.test('docker-compose.yml: API with the Docker socket, sandbox image without it, persistent Redis', async (t) => {
  const compose = parse(await read('docker-compose.yml')) as { services: Record<string, any> }
  t.same(Object.keys(compose.services).sort(), ['api', 'redis', 'sandbox-image'])
  t.ok(
    compose.services.api.volumes.some((v: string) => v.includes('/var/run/docker.sock')),
    'the API reaches Docker',
  )
  t.notOk(JSON.stringify(compose.services['sandbox-image']).includes('docker.sock'), 'the sandbox image never gets the socket')
  // Persistence as `npm start` runs it: the same scripts/redis.conf, mounted and named on the command line.
  const conf = compose.services.redis.volumes.find((v: string) => v.startsWith('./scripts/redis.conf:'))?.split(':')[1]
  t.ok(conf && compose.services.redis.command.includes(conf), 'Redis runs with scripts/redis.conf')
  const redisConf = await read('scripts/redis.conf')
  t.match(redisConf, /^appendonly yes$/m)
  t.match(redisConf, /^appendfsync everysec$/m)
  t.equal(compose.services.api.environment.SANDBOX_IMAGE, compose.services['sandbox-image'].image)
  // dockerd writes a checkpoint at its host path, and a restore places it under dockerd's data root: both at the host's paths.
  const dir = compose.services.api.environment.CHECKPOINT_DIR as string
  t.ok(compose.services.api.volumes.includes(`${dir}:${dir}`), 'the checkpoint folder is mounted at its host path')
  t.ok(
    compose.services.api.volumes.includes('/var/lib/docker/containers:/var/lib/docker/containers'),
    "dockerd's containers folder is mounted at its host path",
  )
})
