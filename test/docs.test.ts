// The README's configuration table and docker-compose.yml stay true to the code.
import t from 'tap'
import { readFile } from 'node:fs/promises'
import { parse } from 'yaml'
import { withConfigTable } from '../src/config-docs.js'

const root = new URL('..', import.meta.url)

t.test('the README lists every configuration variable with its default (run `npm run docs`)', async (t) => {
  const readme = await readFile(new URL('README.md', root), 'utf8')
  t.equal(readme, withConfigTable(readme))
})

t.test('README names the two commands and .ci/run calls the test command', async (t) => {
  const readme = await readFile(new URL('README.md', root), 'utf8')
  t.match(readme, /npm start/)
  t.match(readme, /npm test/)
  const ci = await readFile(new URL('.ci/run', root), 'utf8')
  t.match(ci, /npm test/)
})

t.test('docker-compose.yml: API with the Docker socket, sandbox image without it, persistent Redis', async (t) => {
  const compose = parse(await readFile(new URL('docker-compose.yml', root), 'utf8')) as { services: Record<string, any> }
  t.same(Object.keys(compose.services).sort(), ['api', 'redis', 'sandbox-image'])
  t.ok(
    compose.services.api.volumes.some((v: string) => v.includes('/var/run/docker.sock')),
    'the API reaches Docker',
  )
  t.notOk(JSON.stringify(compose.services['sandbox-image']).includes('docker.sock'), 'the sandbox image never gets the socket')
  // Persistence as `npm start` runs it: the same scripts/redis.conf, mounted and named on the command line.
  const conf = compose.services.redis.volumes.find((v: string) => v.startsWith('./scripts/redis.conf:'))?.split(':')[1]
  t.ok(conf && compose.services.redis.command.includes(conf), 'Redis runs with scripts/redis.conf')
  const redisConf = await readFile(new URL('scripts/redis.conf', root), 'utf8')
  t.match(redisConf, /^appendonly yes$/m)
  t.match(redisConf, /^appendfsync everysec$/m)
  t.equal(compose.services.api.environment.SANDBOX_IMAGE, compose.services['sandbox-image'].image)
})
