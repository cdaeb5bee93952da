// Polls a condition (an observable state, not a guess at timing) until it holds or time runs out.
export async function waitFor(cond: () => Promise<boolean> | boolean, ms = 20000, everyMs = 25): Promise<boolean> {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (await cond()) return true
    await new Promise((r) => setTimeout(r, everyMs))
  }
  return false
}
