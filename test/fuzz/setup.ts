// The server settings and the fake model shared by the fuzz test and the soak script.
import type { Handler } from '../helpers/fake-llm.js'

/** A small body limit (bodies past it are cheap to send), room for every request, four sessions per tenant. */
export const FUZZ_ENV = {
  BODY_LIMIT_BYTES: String(64 * 1024),
  TENANT_RATE_PER_MIN: '100000000',
  TENANT_MAX_SESSIONS: '4',
}

/** The model's answer in a fuzzed LLM turn: FINAL in agent mode, a print otherwise; never touches the guarded variables. */
export const fakeModelAnswer: Handler = (req, res) => {
  res.stream([req.raw.includes('recursive language model') ? 'FINAL("ok")\n' : 'print("fuzz")\n'])
}
