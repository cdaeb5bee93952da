// The playground's terminal pane in a real Chromium (Debian's chromium, driven by playwright-core):
// xterm.js served by the API under the page's strict CSP, a typed command and its output, the shell's
// state kept across commands, and a window resize that changes the shell's terminal size (stty size).
// The page's screenshot is saved to test/.generated/playground-terminal.png.
import t from 'tap'
import { existsSync } from 'node:fs'
import { mkdir } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { chromium, type Page } from 'playwright-core'
import { API_KEY, startApp } from './helpers/app.js'

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
const SCREENSHOT = fileURLToPath(new URL('./.generated/playground-terminal.png', import.meta.url))

/** What the terminal shows now (its rows, as the DOM renderer draws them). */
const screen = (page: Page) => page.locator('[data-testid="terminal"] .xterm-rows').innerText()

/** Types a command line into the terminal and waits until the screen holds `expect`. */
async function run(page: Page, line: string, expect: RegExp): Promise<string> {
  await page.keyboard.type(line)
  await page.keyboard.press('Enter')
  await page.waitForFunction(
    ({ source, flags }) => new RegExp(source, flags).test((document.querySelector('[data-testid="terminal"] .xterm-rows') as HTMLElement).innerText),
    { source: expect.source, flags: expect.flags },
  )
  return screen(page)
}

t.test('the xterm files are served by the API, under the same policy', async (t) => {
  const h = await startApp(t)
  for (const [path, type] of [
    ['/playground/terminal.js', /javascript/],
    ['/playground/xterm/xterm.mjs', /javascript/],
    ['/playground/xterm/addon-fit.mjs', /javascript/],
    ['/playground/xterm/xterm.css', /css/],
  ] as const) {
    const res = await fetch(h.url + path)
    t.equal(res.status, 200, path)
    t.match(res.headers.get('content-type'), type)
    t.match(res.headers.get('content-security-policy'), /script-src 'self'/)
    t.notMatch(await res.text(), /sourceMappingURL/, 'no pointer to a file not served')
  }
  const page = await (await fetch(`${h.url}/`)).text()
  t.notMatch(page, /https?:\/\/(?!127\.0\.0\.1)/, 'the page loads nothing from elsewhere')
})

t.test('the terminal pane in Chromium', async (t) => {
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
  await page.getByTestId('api-key').fill(API_KEY)
  await page.getByTestId('open-terminal').click()
  await page.waitForFunction(() => document.querySelector('[data-testid="terminal-status"]')?.textContent?.startsWith('open in ses_'))
  await page.waitForFunction(() => /\$ $/m.test((document.querySelector('[data-testid="terminal"] .xterm-rows') as HTMLElement).innerText.trimEnd() + ' '))

  t.test('a typed command shows its output', async (t) => {
    const shown = await run(page, 'echo "sum=$((20 + 22))"', /sum=42/)
    t.match(shown, /sum=42/)
  })

  t.test('the shell keeps its state across commands', async (t) => {
    await run(page, 'mkdir -p kept && cd kept && GREETING=hello', /kept\$ *$/m)
    t.match(await run(page, 'echo "$GREETING from $PWD"', /hello from \/workspace\/kept/), /hello from \/workspace\/kept/)
  })

  t.test('resizing the window resizes the terminal: stty size follows', async (t) => {
    await run(page, 'clear; echo "size=$(stty size)"', /size=\d+ \d+/)
    const before = /size=(\d+) (\d+)/.exec(await screen(page))!
    await page.setViewportSize({ width: 700, height: 600 })
    // The pane refits to the window and sends the new size; the shell sees it on its next command.
    let after: RegExpExecArray | null = null
    for (let i = 0; i < 100; i++) {
      await run(page, 'clear; echo "now=$(stty size)"', /now=\d+ \d+/)
      after = /now=(\d+) (\d+)/.exec(await screen(page))
      if (after && (after[1] !== before[1] || after[2] !== before[2])) break
    }
    t.ok(after, 'stty size answered')
    t.ok(Number(after![2]) < Number(before[2]), `fewer columns: ${before[2]} -> ${after![2]}`)
    t.ok(Number(after![1]) < Number(before[1]), `fewer rows: ${before[1]} -> ${after![1]}`)
  })

  t.test('the code cell and the terminal share the session', async (t) => {
    await page.getByTestId('code').fill('open("kept/from-python.txt", "w").write("written by python")')
    await page.getByTestId('run').click()
    await page.waitForFunction(() => (document.querySelector('[data-testid="status"]') as HTMLElement).dataset.state === 'ok')
    await page.locator('[data-testid="terminal"]').click()
    t.match(await run(page, 'cat from-python.txt; echo', /written by python/), /written by python/)
  })

  t.test('a screenshot, and no script errors', async (t) => {
    await mkdir(fileURLToPath(new URL('./.generated/', import.meta.url)), { recursive: true })
    await page.screenshot({ path: SCREENSHOT, fullPage: true })
    t.ok(existsSync(SCREENSHOT), SCREENSHOT)
    t.same(pageErrors, [], 'no script errors in the page')
  })

  t.test('exit ends the shell; the pane says so', async (t) => {
    await page.locator('[data-testid="terminal"]').click()
    await page.keyboard.type('exit 4')
    await page.keyboard.press('Enter')
    await page.waitForFunction(() => document.querySelector('[data-testid="terminal-status"]')?.textContent === 'the shell exited (4)')
    t.equal(await page.getByTestId('close-terminal').isDisabled(), true)
  })
})
