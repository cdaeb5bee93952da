// Sandbox templates: SANDBOX_TEMPLATES names the images a session or one-shot may start from,
// GET /v1/templates lists them, an unknown name is a 400 and an image without the REPL a clear 502;
// a template built FROM the sandbox image (as docs/api.md shows) runs sessions and one-shots.
import t from 'tap'
import { loadConfig } from '../src/config.js'
import { containersOf, startApp, testEnv } from './helpers/app.js'
import { api, executeSse, stdoutOf, stdoutText } from './helpers/client.js'
import { buildImage } from './helpers/images.js'
import { waitFor } from './helpers/wait.js'

t.test('SANDBOX_TEMPLATES is validated at start, naming the variable', async (t) => {
  for (const bad of ['extra', 'Bad Name=img', 'default=img', 'a=img,a=img2', 'x=']) {
    t.throws(() => loadConfig(testEnv({ SANDBOX_TEMPLATES: bad })), /SANDBOX_TEMPLATES/, bad)
  }
  t.same(
    [...loadConfig(testEnv({ SANDBOX_TEMPLATES: ' a=img:1 , b.2=reg/x:y ' })).templates],
    [
      ['default', process.env.SANDBOX_IMAGE || 'replcast-sandbox:latest'],
      ['a', 'img:1'],
      ['b.2', 'reg/x:y'],
    ],
  )
})

t.test('templates: listed, unknown, without the REPL, and one built FROM the sandbox image', async (t) => {
  const base = loadConfig(testEnv()).SANDBOX_IMAGE
  // A template the way docs/api.md builds one: FROM the sandbox image, plus what the code needs.
  const extra = await buildImage(t, 'template', `FROM ${base}\nCOPY greet.py /opt/replcast/greet.py\n`, {
    'greet.py': 'def hello(name):\n    return f"hello, {name}, from a template"\n',
  })
  // Its command runs the REPL, but it has no Python: its sandboxes exit before they say ready.
  const noPython = await buildImage(t, 'no-python', 'FROM replcast-base:bookworm\nCMD ["python3", "-m", "replcast_repl"]\n')
  const h = await startApp(t, { SANDBOX_TEMPLATES: `extra=${extra},bare=replcast-base:bookworm,nopython=${noPython},missing=replcast-no-such-image:1` })

  const list = await api(h.url, 'GET', '/v1/templates')
  t.equal(list.status, 200)
  t.same(list.body.templates, [
    { name: 'default', image: base, default: true },
    { name: 'extra', image: extra, default: false },
    { name: 'bare', image: 'replcast-base:bookworm', default: false },
    { name: 'nopython', image: noPython, default: false },
    { name: 'missing', image: 'replcast-no-such-image:1', default: false },
  ])

  const created = await api(h.url, 'POST', '/v1/sessions', { template: 'extra' })
  t.equal(created.status, 201)
  t.equal(created.body.template, 'extra', 'the session says its template')
  const r = await executeSse(h.url, created.body.id, 'import greet\nprint(greet.hello("you"))')
  t.equal(stdoutOf(r.events), 'hello, you, from a template\n', "the template's module is there")
  const plain = await api(h.url, 'POST', '/v1/sessions', {})
  t.equal(plain.body.template, 'default')
  const without = await executeSse(h.url, plain.body.id, 'import greet')
  t.equal(without.events.find((e) => e.event === 'error')?.data.ename, 'ModuleNotFoundError', 'the default template does not have it')

  const once = await api(h.url, 'POST', '/v1/execute', { template: 'extra', code: 'import greet\nprint(greet.hello("once"))' })
  t.equal(once.status, 200)
  t.equal(stdoutText(once.body.events), 'hello, once, from a template\n', 'a one-shot of the template')

  t.ok(await waitFor(async () => (await containersOf(h.deployment)).length === 2), "the one-shot's sandbox went after it")
  const before = 2
  for (const [path, body] of [
    ['/v1/sessions', { template: 'nosuch' }],
    ['/v1/execute', { template: 'nosuch', code: '1' }],
  ] as const) {
    const u = await api(h.url, 'POST', path, body)
    t.equal(u.status, 400, `${path}: unknown template`)
    t.equal(u.body.code, 'unknown_template')
    t.match(u.body.detail, /nosuch/)
  }

  for (const name of ['bare', 'missing']) {
    const t0 = Date.now()
    const u = await api(h.url, 'POST', '/v1/sessions', { template: name })
    t.equal(u.status, 502, `${name}: refused`)
    t.equal(u.body.code, 'template_unusable')
    t.match(u.body.detail, new RegExp(`template ${name}'s image does not run the replcast REPL`))
    t.ok(Date.now() - t0 < 5000, `${name}: at once, from a look at the image (${Date.now() - t0} ms)`)
  }
  const t0 = Date.now()
  const np = await api(h.url, 'POST', '/v1/execute', { template: 'nopython', code: '1' })
  t.equal(np.status, 502, 'an image whose REPL never says ready')
  t.equal(np.body.code, 'template_unusable')
  t.match(np.body.detail, /template nopython's image does not run the replcast REPL/)
  t.ok(Date.now() - t0 < 15000, `seen when its sandbox exits, not at the start timeout (${Date.now() - t0} ms)`)
  t.equal((await containersOf(h.deployment)).length, before, 'refused templates leave no container')
  t.same(
    (await api(h.url, 'GET', '/v1/sessions')).body.sessions.map((s: { id: string }) => s.id).sort(),
    [created.body.id, plain.body.id].sort(),
    'and no session',
  )
})
