// clients/typescript is a real package: its types are generated from the committed openapi.yaml
// (drift-tested here), and `npm pack` + `npm install <tarball>` in another project gives a module
// that imports, type-checks and drives the live server, and a working `replcast` bin.
import t from 'tap'
import { execFile } from 'node:child_process'
import { readdir, readFile, writeFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { API_KEY, startApp } from './helpers/app.js'

const run = promisify(execFile)
const root = fileURLToPath(new URL('..', import.meta.url))
const pkgDir = `${root}clients/typescript`
const bin = (name: string) => `${root}node_modules/.bin/${name}`
// npm and the programs it starts run on plain Node, without tap's TypeScript loader.
const plainEnv = (extra: Record<string, string> = {}) => {
  const env: Record<string, string | undefined> = { ...process.env, ...extra }
  delete env.NODE_OPTIONS
  return env
}

t.test('the generated types are current (run `npm run openapi` after changing a route)', async (t) => {
  const dir = t.testdir()
  await run(bin('openapi-typescript'), ['openapi.yaml', '-o', `${dir}/schema.ts`], { cwd: root })
  t.equal(await readFile(`${pkgDir}/src/schema.ts`, 'utf8'), await readFile(`${dir}/schema.ts`, 'utf8'))
})

t.test('npm pack, then npm install into another project: import, type-check, run, and the bin', async (t) => {
  const dir = t.testdir({ app: { 'package.json': JSON.stringify({ name: 'consumer', private: true, type: 'module' }) } })
  await run('npm', ['pack', '--silent', '--pack-destination', dir], { cwd: pkgDir, env: plainEnv() })
  const tarball = (await readdir(dir)).find((f) => f.endsWith('.tgz'))
  t.ok(tarball, 'npm pack made a tarball (building dist/ first)')
  const app = `${dir}/app`
  await run('npm', ['install', '--offline', '--no-audit', '--no-fund', '--silent', `${dir}/${tarball}`], { cwd: app, env: plainEnv() })
  const installed = JSON.parse(await readFile(`${app}/node_modules/@replcast/client/package.json`, 'utf8'))
  t.equal(installed.name, '@replcast/client')
  t.notOk(
    (await readdir(`${app}/node_modules/@replcast/client/dist`)).some((f) => f.endsWith('.ts') && !f.endsWith('.d.ts')),
    'it ships JavaScript and declarations, no sources',
  )

  await writeFile(
    `${app}/main.ts`,
    `import { ReplcastClient, NotFoundError, type ExecutionEvent, type Session } from '@replcast/client'
const client = new ReplcastClient({ url: process.env.URL!, apiKey: process.env.KEY! })
const session: Session = await client.createSession()
const stream = await client.stream(session.id, 'print(6 * 7)')
const events: ExecutionEvent[] = []
for await (const e of stream) events.push(e)
const missing = await client.getSession('ses_AAAAAAAAAAAAAAAAAAAA').catch((e: unknown) => e)
await client.deleteSession(session.id)
console.log(JSON.stringify({ status: stream.status, stdout: events.filter((e) => e.type === 'stdout').map((e) => e.text).join(''), notFound: missing instanceof NotFoundError }))
`,
  )
  const tscArgs = ['--ignoreConfig', '--noEmit', '--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022', '--types', 'node']
  await run(bin('tsc'), [...tscArgs, '--typeRoots', `${root}node_modules/@types`, 'main.ts'], { cwd: app })
  t.pass('a consumer type-checks against the installed declarations')

  const h = await startApp(t)
  const env = plainEnv({ URL: h.url, KEY: API_KEY, REPLCAST_URL: h.url, REPLCAST_API_KEY: API_KEY })
  const { stdout } = await run(process.execPath, ['main.ts'], { cwd: app, env })
  t.same(JSON.parse(stdout), { status: 'ok', stdout: '42\n', notFound: true }, 'the installed module drives the server')
  const cli = await run(`${app}/node_modules/.bin/replcast`, ['run', '-c', 'print(2 + 2)'], { cwd: app, env })
  t.equal(cli.stdout, '4\n', 'the installed replcast bin (built JavaScript) runs code')
})
