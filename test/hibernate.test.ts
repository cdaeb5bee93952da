// Hibernate and wake on the real engine with runsc: the state sandbox code can observe comes back
// exactly, cycle after cycle, under the same session id; the container is gone while it sleeps.
import t from 'tap'
import { existsSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { containersOf } from './helpers/app.js'
import { api, createSession, executeSse, stdoutOf } from './helpers/client.js'
import { hibernate, startHibernationApp } from './helpers/hibernation.js'

const SETUP = `
import json, re, collections, threading, os
try:
    import numpy
    arr = numpy.arange(10) * 3
except ImportError:
    arr = None
counter = 41
def bump(n):
    return n + 1
class Box:
    def __init__(self, v):
        self.v = v
box = Box('kept')
pat = re.compile(r'b+')
ready = threading.Event()
sleeper = threading.Thread(target=ready.wait, daemon=True)
sleeper.start()
os.makedirs('/workspace/sub', exist_ok=True)
os.chdir('/workspace/sub')
os.environ['WAKE_TEST'] = 'yes'
print('set')
`
const CHECK = (cycle: number) => `
open('/workspace/cycle-${cycle}.txt', 'w').write('written before hibernation ${cycle}')
counter = bump(counter)
print(json.dumps([counter, box.v, pat.sub('B', 'abbbc'), collections.Counter('aab')['a'], sleeper.is_alive(),
  os.getcwd(), os.environ.get('WAKE_TEST'), sorted(os.listdir('/workspace')), None if arr is None else int(arr.sum())]))
`

t.test('state survives many hibernate/wake cycles with the same id', async (t) => {
  const h = await startHibernationApp(t)
  const sid = await createSession(h.url, { runtime: 'runsc' })
  t.equal(stdoutOf((await executeSse(h.url, sid, SETUP)).events).trim(), 'set')
  for (let cycle = 1; cycle <= 5; cycle++) {
    const before = (await executeSse(h.url, sid, CHECK(cycle))).events
    const s = await hibernate(t, h.url, sid)
    t.ok(s.hibernated_at, 'hibernated_at is set')
    t.equal((await containersOf(h.deployment)).length, 0, 'no container while hibernated')
    const dir = join(h.checkpointDir, sid)
    t.equal(statSync(dir).mode & 0o777, 0o700, 'the checkpoint folder is owner-only')
    for (const f of readdirSync(dir)) t.equal(statSync(join(dir, f)).mode & 0o777, 0o600, `${f} is owner-only`)
    t.equal((await api(h.url, 'GET', `/v1/sessions/${sid}`)).body.status, 'hibernated', 'GET does not wake it')
    const [got] = JSON.parse(stdoutOf(before))
    // Waking on use: this execution restores the sandbox first.
    const after = JSON.parse(stdoutOf((await executeSse(h.url, sid, 'counter -= 1\n' + CHECK(cycle))).events))
    t.equal(after[0], got, `cycle ${cycle}: globals, functions kept`)
    t.same(after.slice(1, 7), ['kept', 'aBc', 2, true, '/workspace/sub', 'yes'], `cycle ${cycle}: instance, modules, thread, cwd, env kept`)
    t.same(
      after[7].filter((f: string) => f.startsWith('cycle-')),
      Array.from({ length: cycle }, (_, i) => `cycle-${i + 1}.txt`),
      `cycle ${cycle}: every file written before each hibernation is there`,
    )
    if (after[8] !== null) t.equal(after[8], 135, 'a numpy array kept')
    const s2 = (await api(h.url, 'GET', `/v1/sessions/${sid}`)).body
    t.equal(s2.id, sid)
    t.equal(s2.status, 'ready')
    t.notOk(existsSync(dir), 'the checkpoint is gone once the session is awake')
  }
  const count = (await api(h.url, 'GET', `/v1/sessions/${sid}`)).body.execution_count
  t.equal(count, 11, 'execution_count went on across the cycles')
})
