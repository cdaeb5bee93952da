// A session's terminal (GET /v1/sessions/{id}/pty): the round trip of one keystroke (sent as a binary
// frame, until the output holding its echo comes back from bash's readline), beside a bash execution's
// first output (POST .../executions {"language": "bash", "code": "echo hi"} until its first stdout
// event) in the same session of the same server, the two measured in alternating blocks so both see
// the same machine. Also how long a terminal takes to open (the upgrade until the first prompt).
// Run: npm run bench   (or: node --import=@tapjs/typescript/import bench/pty.ts; BENCH_PTY_KEYS, BENCH_PTY_EXECS)
import WebSocket from 'ws'
import { createSession, execute, type Target } from './client.js'
import { startServer } from './server.js'
import { line, summarize } from './stats.js'

const KEYS = Number(process.env.BENCH_PTY_KEYS ?? 600)
const EXECS = Number(process.env.BENCH_PTY_EXECS ?? 100)
const BLOCKS = 10
const OPENS = 10

interface Terminal {
  ws: WebSocket
  /** Resolves with the time the output since the last clear() (or shows()) first held `text`. */
  shows(text: string): Promise<number>
  /** Forgets the output so far. */
  clear(): void
}

async function openTerminal(t: Target, sid: string): Promise<Terminal> {
  const ws = new WebSocket(`${t.base.replace(/^http/, 'ws')}/v1/sessions/${sid}/pty`, { headers: { authorization: t.headers.authorization! } })
  // The output since it was last cleared (with when it last grew), and who waits for what in it.
  let since = ''
  let lastAt = 0
  let wanted: { text: string; resolve: (at: number) => void } | null = null
  ws.on('message', (data: Buffer, binary) => {
    if (!binary) return
    lastAt = performance.now()
    since += data.toString('latin1')
    if (wanted && since.includes(wanted.text)) {
      since = ''
      wanted.resolve(lastAt)
      wanted = null
    }
  })
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve())
    ws.once('error', reject)
  })
  return {
    ws,
    shows: (text) => {
      if (!since.includes(text)) return new Promise((resolve) => (wanted = { text, resolve }))
      since = ''
      return Promise.resolve(lastAt)
    },
    clear: () => {
      since = ''
    },
  }
}

const PROMPT = '$ '

/** Typing a comment line, one key at a time: each key's round trip, from sending it to the first output holding its echo. */
async function typeLine(term: Terminal, keys: number): Promise<number[]> {
  const out: number[] = []
  const line = '#' + 'abcdefghijklmnopqrstuvwxyz'.repeat(4).slice(0, keys - 1)
  for (const key of line) {
    term.clear()
    const echoed = term.shows(key)
    const t0 = performance.now()
    term.ws.send(Buffer.from(key))
    out.push((await echoed) - t0)
  }
  // Enter runs the comment (nothing) and brings the next prompt.
  term.clear()
  const prompt = term.shows(PROMPT)
  term.ws.send(Buffer.from('\r'))
  await prompt
  return out
}

/** A bash execution's first output: from the POST to its first stdout event. */
async function bashFirstOutput(t: Target, sid: string): Promise<number> {
  let first = NaN
  const run = await execute(t, sid, 'echo hi', {
    language: 'bash',
    onEvent: (e) => {
      if (e.event === 'stdout' && Number.isNaN(first)) first = e.at
    },
  })
  if (Number.isNaN(first)) throw new Error('the bash execution printed nothing')
  return first - run.t0
}

async function main(): Promise<void> {
  const server = await startServer()
  try {
    const t: Target = server
    const sid = await createSession(t)
    const opens: number[] = []
    for (let i = 0; i < OPENS; i++) {
      const t0 = performance.now()
      const term = await openTerminal(t, sid)
      await term.shows(PROMPT)
      opens.push(performance.now() - t0)
      term.ws.close()
      await new Promise((resolve) => term.ws.once('close', resolve))
    }
    const term = await openTerminal(t, sid)
    await term.shows(PROMPT)
    // Warm-up: the first calls of each kind pay for what is made once (connections, JIT).
    await typeLine(term, 20)
    for (let i = 0; i < 5; i++) await bashFirstOutput(t, sid)
    const keys: number[] = []
    const execs: number[] = []
    for (let b = 0; b < BLOCKS; b++) {
      for (let typed = 0; typed < KEYS / BLOCKS; typed += 60) keys.push(...(await typeLine(term, Math.min(60, KEYS / BLOCKS - typed))))
      for (let i = 0; i < EXECS / BLOCKS; i++) execs.push(await bashFirstOutput(t, sid))
    }
    term.ws.close()
    const k = summarize(keys)
    const e = summarize(execs)
    console.log(line('terminal open (upgrade to first prompt)', opens))
    console.log(line('pty keystroke -> echo', keys))
    console.log(line('bash execution -> first stdout (baseline)', execs))
    console.log(
      `pty keystroke round trip: p50 ${k.median.toFixed(2)} ms, p99 ${k.p99.toFixed(2)} ms; ` +
        `bash first output: p50 ${e.median.toFixed(2)} ms, p99 ${e.p99.toFixed(2)} ms; ` +
        `ratio (p50) ${(k.median / e.median).toFixed(2)}`,
    )
  } finally {
    await server.close()
  }
}

await main()
