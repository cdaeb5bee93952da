// The playground at GET / in a real Chromium (Debian's chromium, driven by playwright-core; the test
// set-up installs it): output streams in live, the session and its state last across runs, a
// matplotlib figure shows as an image, an error as its traceback, HTML as a table, the interrupt
// button stops running code, and a runsc session hibernates and the next run wakes it with its state.
// The page's screenshot is saved to test/.generated/playground.png.
import t from 'tap'
import { existsSync } from 'node:fs'
import { mkdir } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { chromium, type Page } from 'playwright-core'
import { API_KEY, startApp } from './helpers/app.js'
import { api } from './helpers/client.js'
import { startHibernationApp } from './helpers/hibernation.js'

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
const SCREENSHOT = fileURLToPath(new URL('./.generated/playground.png', import.meta.url))
const ENDED = ['ok', 'error', 'interrupted', 'timeout', 'killed', 'oom', 'failed']

/** Types code into the cell and runs it (with the button, or Ctrl+Enter); resolves with the status it ends in. */
async function runCell(page: Page, code: string, how: 'button' | 'keys' = 'button'): Promise<string> {
  await page.getByTestId('code').fill(code)
  if (how === 'keys') await page.getByTestId('code').press('Control+Enter')
  else await page.getByTestId('run').click()
  await page.waitForFunction((ended) => {
    const s = document.querySelector('[data-testid="status"]') as HTMLElement
    return ended.includes(s.dataset.state ?? '') && !(document.querySelector('[data-testid="run"]') as HTMLButtonElement).disabled
  }, ENDED)
  return page.getByTestId('status').getAttribute('data-state') as Promise<string>
}

t.test('GET / is the page, served without a key, under a strict content security policy', async (t) => {
  const h = await startApp(t)
  const res = await fetch(`${h.url}/`)
  t.equal(res.status, 200)
  t.match(res.headers.get('content-type'), /^text\/html/)
  t.match(res.headers.get('content-security-policy'), /script-src 'self'/)
  const html = await res.text()
  for (const id of ['api-key', 'code', 'run', 'output', 'status']) t.match(html, `data-testid="${id}"`)
  t.equal((await fetch(`${h.url}/playground/app.js`)).status, 200)
  t.equal((await api(h.url, 'GET', '/v1/sessions', undefined, { key: '' })).status, 401, 'what the page calls still needs a key')
})

t.test('the playground in Chromium', async (t) => {
  t.ok(existsSync(CHROMIUM), `Chromium at ${CHROMIUM} (scripts/setup.sh installs Debian's chromium)`)
  const h = await startApp(t)
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] })
  t.teardown(() => browser.close())
  const page = await browser.newPage({ viewport: { width: 1100, height: 900 } })
  const pageErrors: string[] = []
  page.on('pageerror', (e) => pageErrors.push(e.message))
  page.on('console', (m) => {
    if (m.type() === 'error') pageErrors.push(m.text())
  })
  await page.goto(`${h.url}/`)

  t.test('without a key, a run fails with the API saying why', async (t) => {
    t.equal(await runCell(page, 'print(1)'), 'failed')
    t.match(await page.getByTestId('output').textContent(), /unauthorized/)
    pageErrors.length = 0 // the browser logs the 401 itself
  })

  t.test('output streams in as it is printed: the first line shows while the code sleeps', async (t) => {
    await page.getByTestId('api-key').fill(API_KEY)
    // Every change to the output is stamped in the page, so the order and gap are measured where they are shown.
    await page.evaluate(() => {
      const w = window as unknown as { seen: Array<{ at: number; text: string }> }
      w.seen = []
      const out = document.querySelector('[data-testid="output"]')!
      new MutationObserver(() => w.seen.push({ at: performance.now(), text: out.textContent ?? '' })).observe(out, {
        childList: true,
        subtree: true,
        characterData: true,
      })
    })
    const code = 'import time\nprint("first", flush=True)\ntime.sleep(1.5)\nprint("second", flush=True)\nx = 41'
    t.equal(await runCell(page, code), 'ok')
    const seen = await page.evaluate(() => (window as unknown as { seen: Array<{ at: number; text: string }> }).seen)
    const first = seen.find((s) => s.text.includes('first'))
    const second = seen.find((s) => s.text.includes('second'))
    t.ok(first && second, 'both lines were shown')
    t.notOk(first!.text.includes('second'), 'the first line was shown alone')
    t.ok(second!.at - first!.at >= 1000, `the first line was on screen while the code slept (${Math.round(second!.at - first!.at)} ms before the second)`)
  })

  t.test('the session and its variables are kept across runs; Ctrl+Enter runs', async (t) => {
    const session = await page.getByTestId('session').textContent()
    t.equal(await runCell(page, 'print(x + 1)', 'keys'), 'ok')
    t.equal(await page.getByTestId('output').textContent(), '42\n')
    t.equal(await page.getByTestId('session').textContent(), session, 'the same session')
    t.equal((await api(h.url, 'GET', '/v1/sessions')).body.sessions.length, 1)
  })

  t.test('an error shows its traceback', async (t) => {
    t.equal(await runCell(page, 'def f():\n    raise ValueError("boom")\nf()'), 'error')
    t.match(await page.locator('[data-testid="output"] .error').textContent(), /Traceback[\s\S]*ValueError: boom/)
  })

  t.test('a DataFrame shows as an HTML table', async (t) => {
    t.equal(await runCell(page, 'import pandas as pd\npd.DataFrame({"a": [1, 2], "b": [3, 4]})'), 'ok')
    t.equal(await page.locator('[data-testid="output"] table td').count(), 4)
  })

  t.test('a matplotlib figure shows as an image the browser decodes', async (t) => {
    const code =
      'import matplotlib.pyplot as plt\nplt.figure(figsize=(5, 3))\nplt.plot([0, 1, 2, 3], [0, 1, 4, 9], marker="o")\nplt.title("squares")\nplt.show()'
    t.equal(await runCell(page, code), 'ok')
    const img = page.locator('[data-testid="output"] img')
    t.match(await img.getAttribute('src'), /^data:image\/png;base64,/)
    t.ok(await img.evaluate((el: HTMLImageElement) => el.complete && el.naturalWidth > 100), 'decoded, with the figure size')
  })

  t.test('the interrupt button stops running code and keeps the session', async (t) => {
    await page.getByTestId('code').fill('import time\nprint("waiting", flush=True)\ntime.sleep(60)')
    await page.getByTestId('run').click()
    await page.waitForFunction(() => document.querySelector('[data-testid="output"]')?.textContent?.includes('waiting'))
    await page.getByTestId('interrupt').click()
    await page.waitForFunction(() => (document.querySelector('[data-testid="status"]') as HTMLElement).dataset.state === 'interrupted')
    t.match(await page.getByTestId('output').textContent(), /KeyboardInterrupt/)
    t.equal(await runCell(page, 'print(x)'), 'ok')
    t.equal(await page.getByTestId('output').textContent(), '41\n')
  })

  t.test('a screenshot of the page after these runs', async (t) => {
    t.equal(await runCell(page, 'import matplotlib.pyplot as plt\nprint("x =", x)\nplt.plot([3, 1, 2])\nplt.show()\nx * 2'), 'ok')
    await mkdir(fileURLToPath(new URL('./.generated/', import.meta.url)), { recursive: true })
    await page.screenshot({ path: SCREENSHOT, fullPage: true })
    t.ok(existsSync(SCREENSHOT), SCREENSHOT)
    t.same(pageErrors, [], 'no script errors in the page')
  })
})

t.test('the playground hibernates a runsc session and the next run wakes it with its state', async (t) => {
  const h = await startHibernationApp(t) // runsc sessions on an engine that checkpoints
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] })
  t.teardown(() => browser.close())
  const page = await browser.newPage({ viewport: { width: 1100, height: 900 } })
  const pageErrors: string[] = []
  page.on('pageerror', (e) => pageErrors.push(e.message))
  await page.goto(`${h.url}/`)
  await page.getByTestId('api-key').fill(API_KEY)
  t.ok(await page.getByTestId('hibernate').isDisabled(), 'no session yet: nothing to hibernate')

  t.equal(await runCell(page, "kept = 'set before'\nopen('/workspace/note.txt', 'w').write('a file')\nprint('ok')"), 'ok')
  t.equal(await page.getByTestId('session-state').getAttribute('data-state'), 'ready')
  const sid = /ses_\w+/.exec((await page.getByTestId('session').textContent()) ?? '')![0]

  await page.getByTestId('hibernate').click()
  await page.waitForFunction(() => (document.querySelector('[data-testid="session-state"]') as HTMLElement).dataset.state === 'hibernated')
  t.match(await page.getByTestId('session-state').textContent(), /^hibernated/, 'the page shows it hibernated')
  t.ok(await page.getByTestId('hibernate').isDisabled(), 'a hibernated session cannot be hibernated again from the page')
  t.equal((await api(h.url, 'GET', `/v1/sessions/${sid}`)).body.status, 'hibernated', 'the server says so too')

  t.equal(await runCell(page, "print(kept, open('/workspace/note.txt').read())"), 'ok')
  t.equal(await page.locator('[data-testid="output"] pre.stdout').textContent(), 'set before a file\n', 'the variable and the file are kept')
  t.match(await page.locator('[data-testid="output"] .note').textContent(), /^session woken from hibernation in \d+\.\d s/, 'the run says it woke the session')
  t.match(await page.getByTestId('session-state').textContent(), /^woken in \d+\.\d s$/)
  t.equal(await page.getByTestId('session-state').getAttribute('data-state'), 'ready')
  t.equal(await page.getByTestId('session').textContent(), `session ${sid}`, 'the same session')
  t.equal((await api(h.url, 'GET', `/v1/sessions/${sid}`)).body.status, 'ready')
  t.notOk(await page.getByTestId('hibernate').isDisabled(), 'it can hibernate again')

  // Hibernated elsewhere (another client, or the server at the idle deadline): the page shows it when looked at again.
  t.equal((await api(h.url, 'POST', `/v1/sessions/${sid}/hibernate`)).status, 200)
  await page.evaluate(() => document.dispatchEvent(new Event('visibilitychange')))
  await page.waitForFunction(() => (document.querySelector('[data-testid="session-state"]') as HTMLElement).dataset.state === 'hibernated')
  t.equal(await runCell(page, 'print(kept)'), 'ok')
  t.equal(await page.locator('[data-testid="output"] pre.stdout').textContent(), 'set before\n', 'woken again, the variable kept')
  t.equal(await page.getByTestId('session-state').getAttribute('data-state'), 'ready')
  t.same(pageErrors, [], 'no script errors in the page')
})
