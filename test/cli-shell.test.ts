// `replcast shell SESSION` as a person uses it: the CLI runs in a real terminal (a tmux pane, keys
// typed with send-keys, the screen read with capture-pane): a command and its output, the shell's
// state kept, Ctrl+C going to the remote shell (not ending the CLI), the remote terminal resized with
// the local one (SIGWINCH), and on exit the shell's exit code with the local terminal restored.
import t, { type Test } from 'tap'
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { promisify } from 'node:util'
import { startApp } from './helpers/app.js'
import { api, createSession } from './helpers/client.js'
import { CLI_BIN, cliEnv } from './helpers/cli.js'
import { waitFor } from './helpers/wait.js'

const run = promisify(execFile)

t.test('replcast shell in tmux', async (t) => {
  const { stdout: version } = await run('tmux', ['-V']).catch(() => ({ stdout: '' }))
  t.match(version, /^tmux \d/, 'tmux is installed (scripts/setup.sh installs it)')
  const h = await startApp(t)
  const sid = await createSession(h.url)

  const socket = `replcast-test-${randomBytes(4).toString('hex')}`
  const env: Record<string, string | undefined> = { ...cliEnv(h.url), TERM: 'xterm-256color' }
  delete env.TMUX
  const tmux = (...args: string[]) => run('tmux', ['-L', socket, '-f', '/dev/null', ...args], { env })
  // After the CLI: its exit code and whether the terminal is back in cooked mode (icanon, echo), then the pane stays.
  const after = 'echo "cli-exit=$?"; stty -a | grep -ow -- "-\\?icanon\\|-\\?echo" | tr "\\n" " "; echo; exec sleep 600'
  await tmux('new-session', '-d', '-s', 'main', '-x', '100', '-y', '30', `${process.execPath} ${CLI_BIN} shell ${sid}; ${after}`)
  t.teardown(() => tmux('kill-server').catch(() => undefined))
  const screen = async () => (await tmux('capture-pane', '-p', '-t', 'main')).stdout
  const shows = async (tt: Test, re: RegExp) => {
    let last = ''
    const ok = await waitFor(async () => re.test((last = await screen())), 20000, 50)
    tt.ok(ok, `the screen shows ${re}${ok ? '' : `; it shows:\n${last}`}`)
  }
  const type = async (line: string) => tmux('send-keys', '-t', 'main', '-l', line).then(() => tmux('send-keys', '-t', 'main', 'Enter'))

  await shows(t, /sandbox@\S+:~\$ *$/m)

  t.test('a command shows its output; the shell keeps its state', async (t) => {
    await type('echo "<$((6 * 7))>"')
    await shows(t, /^<42>$/m)
    await type('cd /tmp && V=seven')
    await type('echo "<$PWD:$V>"')
    await shows(t, /^<\/tmp:seven>$/m)
  })

  t.test('the remote terminal has the local size, and follows a resize', async (t) => {
    await type('clear; echo "<$(stty size)>"')
    await shows(t, /^<30 100>$/m)
    await tmux('resize-window', '-t', 'main', '-x', '120', '-y', '40')
    // The CLI sends the new size on SIGWINCH; the shell sees it on its next command.
    let seen = ''
    const ok = await waitFor(async () => {
      const tag = randomBytes(3).toString('hex')
      await type(`clear; echo "<${tag} $(stty size)>"`)
      const re = new RegExp(`^<${tag} (\\d+ \\d+)>$`, 'm')
      await waitFor(async () => re.test(await screen()), 5000, 50)
      seen = re.exec(await screen())?.[1] ?? ''
      return seen === '40 120'
    }, 20000)
    t.ok(ok, `stty size follows: ${seen}`)
  })

  t.test('Ctrl+C goes to the remote shell, not to the CLI', async (t) => {
    await type('clear; sleep 300')
    const sleeping = async () => {
      const r = await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code: "grep -l '^sleep' /proc/[0-9]*/cmdline || true", language: 'bash' })
      return r.body.events.some((e: { type: string }) => e.type === 'stdout')
    }
    t.ok(await waitFor(sleeping, 20000, 100), 'the remote sleep runs')
    await tmux('send-keys', '-t', 'main', 'C-c')
    await type('echo "<after:$?>"')
    await shows(t, /^<after:130>$/m)
  })

  t.test('exit: the CLI exits with the shell exit code and the terminal is restored', async (t) => {
    await type('exit 5')
    await shows(t, /^cli-exit=5$/m)
    const text = await screen()
    t.match(text, /^icanon echo$/m, 'canonical mode and echo are back (stty -a says icanon and echo, not -icanon, -echo)')
  })
})
