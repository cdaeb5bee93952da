// WorkspaceFiles (src/sandbox/workspace-files.ts) against a stand-in Docker engine whose exec starts
// and then never says anything (a sandbox starved of memory or CPU, an engine that loses the output):
// a file operation fails within the Docker time limit, and the program's connection is closed,
// instead of holding its request forever.
import t from 'tap'
import { Duplex } from 'node:stream'
import type Docker from 'dockerode'
import { WorkspaceFiles } from '../../src/sandbox/workspace-files.js'

function silentEngine() {
  const sockets: Duplex[] = []
  const docker = {
    getContainer: () => ({
      exec: async () => ({
        start: async () => {
          // Takes what is written (and the end of the program's input), answers nothing, never ends.
          const s = new Duplex({ read: () => undefined, write: (_chunk, _enc, done) => done(), final: (done) => done() })
          sockets.push(s)
          return s
        },
      }),
    }),
  } as unknown as Docker
  return { docker, sockets }
}

t.test('a file program that never answers fails the operation within the time limit', async (t) => {
  const { docker, sockets } = silentEngine()
  const files = new WorkspaceFiles({ docker, user: '1000:1000', timeoutMs: 200 })
  for (const [what, op] of [
    ['list', () => files.list('c1', '', false)],
    ['get', () => files.get('c1', 'a.txt')],
    ['delete', () => files.delete('c1', 'a.txt', false)],
    ['put', () => files.put('c1', 'a.txt', [Buffer.from('x')], { maxBytes: 10 })],
  ] as const) {
    await t.rejects<unknown>(op(), { code: 'no_answer', message: /did not answer the file operation within 200 ms/ }, `${what} fails`)
    t.ok(sockets.at(-1)?.destroyed, `${what}: the program's connection is closed`)
  }
})
