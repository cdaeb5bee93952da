// What the sandbox's kernel holds across a hibernation on the real engine with runsc: a file open
// for writing goes on where it was, a pipe keeps the bytes nobody read yet, a Unix socket pair and
// a TCP connection on the loopback still carry bytes both ways, and a listening socket still
// accepts; both clocks move forward by at least the time spent asleep, never back.
import t from 'tap'
import { api, createSession, executeSse, stdoutOf } from './helpers/client.js'
import { hibernate, startHibernationApp } from './helpers/hibernation.js'

const SETUP = `
import os, socket, time
log = open('/workspace/log.txt', 'w', buffering=1)
log.write('before\\n')
r_fd, w_fd = os.pipe()
os.write(w_fd, b'unread')
left, right = socket.socketpair()
server = socket.socket()
server.bind(('127.0.0.1', 0))
server.listen()
client = socket.create_connection(server.getsockname())
accepted, _ = server.accept()
client.sendall(b'ping')
got_before = accepted.recv(4).decode()
wall_before, mono_before = time.time(), time.monotonic()
print(got_before)
`

const CHECK = `
import json
log.write('after\\n')
log.flush()
pipe = os.read(r_fd, 6).decode()
left.sendall(b'L'); right.sendall(b'R')
pair = right.recv(1).decode() + left.recv(1).decode()
accepted.sendall(b'pong'); client.sendall(b'ping2')
tcp = [client.recv(4).decode(), accepted.recv(5).decode()]
again = socket.create_connection(server.getsockname())
new_conn, _ = server.accept()
again.sendall(b'new')
tcp.append(new_conn.recv(3).decode())
print(json.dumps({
    'file': open('/workspace/log.txt').read(),
    'pipe': pipe,
    'pair': pair,
    'tcp': tcp,
    'wall': time.time() - wall_before,
    'mono': time.monotonic() - mono_before,
}))
`

t.test('open files, pipes and sockets survive a hibernation, and the clocks move on', async (t) => {
  const h = await startHibernationApp(t)
  const sid = await createSession(h.url, { runtime: 'runsc' })
  t.equal(stdoutOf((await executeSse(h.url, sid, SETUP)).events), 'ping\n', 'a TCP connection on the loopback carries bytes')
  const asleepFrom = Date.now()
  await hibernate(t, h.url, sid)
  // The time it stays asleep: a hibernated session is left alone until this GET says so.
  t.equal((await api(h.url, 'GET', `/v1/sessions/${sid}`)).body.status, 'hibernated')
  const r = await api(h.url, 'POST', `/v1/sessions/${sid}/wake`)
  t.equal(r.status, 200, 'it wakes', { body: r.body })
  const asleepMs = Date.now() - asleepFrom
  const out = stdoutOf((await executeSse(h.url, sid, CHECK)).events)
  const got = JSON.parse(out) as { file: string; pipe: string; pair: string; tcp: string[]; wall: number; mono: number }
  t.equal(got.file, 'before\nafter\n', 'a file open for writing goes on where it was')
  t.equal(got.pipe, 'unread', 'a pipe keeps the bytes nobody had read')
  t.equal(got.pair, 'LR', 'a Unix socket pair carries bytes both ways')
  t.same(got.tcp, ['pong', 'ping2', 'new'], 'a TCP connection carries bytes both ways, and the listening socket accepts a new one')
  t.comment(
    `asleep for ${asleepMs} ms as the host saw it; time.time() moved ${Math.round(got.wall * 1000)} ms, time.monotonic() ${Math.round(got.mono * 1000)} ms`,
  )
  // From the line printed before the hibernation to the line printed after it, the host saw at least
  // the hibernate and the wake; each clock has moved at least as far as the session was asleep.
  t.ok(got.wall * 1000 >= asleepMs * 0.9, 'time.time() moved on by the time asleep')
  t.ok(got.mono * 1000 >= asleepMs * 0.9, 'time.monotonic() moved on by the time asleep: it does not stand still while asleep')
})
