// Time from the model token that completes a statement to that statement's first output at
// the client (SSE), through the real openai client, a local OpenAI-compatible server, the
// streamed REPL execution, the Redis event logs and the turn's mirror. Baseline in the same
// run: POST an execution of print(1) and wait for its first stdout event.
// Run: npm run bench   (or: node --import=@tapjs/typescript/import bench/llm-first-output.ts)
import { readSse } from '../test/helpers/client.js'
import { startFakeLlm, type FakeResponse } from '../test/helpers/fake-llm.js'
import { startBenchApp } from './harness.js'
import { line, summarize } from './stats.js'

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 100)
const WARMUP = 5

/** Reads SSE events from a response, calling onEvent(type, data) until it returns true. */
const readEvents = (res: Response, onEvent: (type: string, data: any) => boolean) => readSse(res, (e) => onEvent(e.event, e.data))

async function main(): Promise<void> {
  const llm = await startFakeLlm()
  const bench = await startBenchApp({ OPENAI_BASE_URL: llm.baseURL, REPLCAST_MODEL: 'bench-model' })
  const { base } = bench
  const headers = { ...bench.headers, accept: 'text/event-stream' }
  try {
    const sid = ((await (await fetch(`${base}/v1/sessions`, { method: 'POST', headers, body: '{}' })).json()) as { id: string }).id

    const baseline: number[] = []
    for (let i = 0; i < ROUNDS + WARMUP; i++) {
      const t0 = performance.now()
      const res = await fetch(`${base}/v1/sessions/${sid}/executions`, { method: 'POST', headers, body: JSON.stringify({ code: 'print(1)' }) })
      let first = 0
      await readEvents(res, (type) => {
        if (type === 'stdout' && !first) first = performance.now()
        return type === 'done'
      })
      if (i >= WARMUP) baseline.push(first - t0)
    }

    const llmFirst: number[] = []
    const tokenToCode: number[] = []
    for (let i = 0; i < ROUNDS + WARMUP; i++) {
      let model!: FakeResponse
      let sawCode!: () => void
      const codeSeen = new Promise<void>((r) => {
        sawCode = r
      })
      let t0 = 0
      let t1 = 0
      let tc = 0
      llm.script(async (_req, res) => {
        model = res
        res.token('print(1)') // the statement, still not known to be complete
        await codeSeen
        t0 = performance.now()
        res.token('\nz = ') // the token that completes it: the next statement has begun
      })
      const res = await fetch(`${base}/v1/sessions/${sid}/messages`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ content: 'bench', max_history_length: 0 }),
      })
      await readEvents(res, (type, data) => {
        if (type === 'code' && data.delta === 'print(1)') sawCode()
        if (type === 'code' && data.delta === '\nz = ' && !tc) tc = performance.now()
        if (type === 'stdout' && !t1) {
          t1 = performance.now()
          model.stream(['2\n'])
        }
        return type === 'done'
      })
      if (i >= WARMUP) {
        llmFirst.push(t1 - t0)
        tokenToCode.push(tc - t0)
      }
    }

    console.log(`LLM first-output benchmark (${ROUNDS} rounds after ${WARMUP} warm-up; local OpenAI-compatible server)`)
    console.log(line('execute print(1): request to first stdout (baseline)', baseline))
    console.log(line('LLM turn: completing token to its code event', tokenToCode))
    console.log(line('LLM turn: completing token to first stdout', llmFirst))
    const ratio = summarize(llmFirst).median / summarize(baseline).median
    console.log(`ratio median LLM completing-token→stdout / execute request→stdout = ${ratio.toFixed(2)}x`)
  } finally {
    await bench.close()
    await llm.close()
  }
}

await main()
